package io.cdclake.connect;

import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Turns a Debezium truncate event into a flat marker record that the next transform,
 * Debezium's {@code ExtractNewRecordState}, passes on as it is.
 *
 * <p>Why: {@code ExtractNewRecordState} drops every truncate event (its record strategies return
 * null for them, and no setting changes that), so a {@code TRUNCATE} at the source would never
 * reach the topic, the raw files or the lake. Placed before it in the source connector's
 * transform chain, this transform rewrites the envelope of an event whose {@code op} is
 * {@code t} into a struct that is not an envelope (its schema is not named {@code *.Envelope}),
 * with the fields the flattened change events carry under the same names:
 * {@code __op} ("t"), {@code __lsn}, {@code __source_ts_ms}, {@code __db}, {@code __schema} and
 * {@code __table}. Every other record passes through untouched.
 *
 * <p>The marker has no key (Debezium's truncate has none), so the producer may place it in any
 * partition of the table's topic: the lake orders it among the other changes by
 * {@code (__source_ts_ms, __lsn)}, never by partition ({@code cdc_lake/lake/ordering.py}).
 *
 * <p>It depends on Connect's API only, so it loads from this plugin for any connector.
 */
public class TruncateMarker<R extends ConnectRecord<R>> implements Transformation<R> {

    static final String SCHEMA_NAME = "io.cdclake.connect.TruncateMarker";
    static final Schema MARKER_SCHEMA = SchemaBuilder.struct()
            .name(SCHEMA_NAME)
            .field("__op", Schema.STRING_SCHEMA)
            .field("__lsn", Schema.OPTIONAL_INT64_SCHEMA)
            .field("__source_ts_ms", Schema.OPTIONAL_INT64_SCHEMA)
            .field("__db", Schema.OPTIONAL_STRING_SCHEMA)
            .field("__schema", Schema.OPTIONAL_STRING_SCHEMA)
            .field("__table", Schema.OPTIONAL_STRING_SCHEMA)
            .build();

    @Override
    public R apply(R record) {
        if (!(record.value() instanceof Struct value) || !isEnvelope(value.schema())) {
            return record;
        }
        if (!"t".equals(value.getString("op"))) {
            return record;
        }
        Struct marker = new Struct(MARKER_SCHEMA).put("__op", "t");
        Field sourceField = value.schema().field("source");
        if (sourceField != null && value.get(sourceField) instanceof Struct source) {
            marker.put("__lsn", longField(source, "lsn"));
            marker.put("__source_ts_ms", longField(source, "ts_ms"));
            marker.put("__db", stringField(source, "db"));
            marker.put("__schema", stringField(source, "schema"));
            marker.put("__table", stringField(source, "table"));
        }
        return record.newRecord(record.topic(), record.kafkaPartition(), record.keySchema(),
                record.key(), MARKER_SCHEMA, marker, record.timestamp(), record.headers());
    }

    private static boolean isEnvelope(Schema schema) {
        return schema != null && schema.name() != null && schema.name().endsWith(".Envelope")
                && schema.field("op") != null;
    }

    private static Long longField(Struct struct, String name) {
        Field field = struct.schema().field(name);
        Object v = field == null ? null : struct.get(field);
        return v instanceof Number n ? n.longValue() : null;
    }

    private static String stringField(Struct struct, String name) {
        Field field = struct.schema().field(name);
        Object v = field == null ? null : struct.get(field);
        return v == null ? null : v.toString();
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef();
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }

    @Override
    public void close() {
    }
}
