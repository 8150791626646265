package io.cdclake.connect;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Replaces the values of declared text columns with a salted hash, in the source connector, so
 * the plain value never reaches Kafka, the raw files or the lake.
 *
 * <p>The hash of a value is the lowercase hex of SHA-256 over the salt's UTF-8 bytes followed by
 * the value's UTF-8 bytes (Debezium's {@code column.mask.hash} with its V2 strategy, without the
 * truncation to the column's length). The lake's digest computes the same in PostgreSQL
 * ({@code cdc_lake/lake/digest.py}), so the lake is still compared with the source, value for
 * value. Equal values hash equally: the column still joins and groups.
 *
 * <p>Why not Debezium's own {@code column.mask.hash.<algorithm>.with.salt.<salt>}: the salt is
 * in the property's name there, so no config provider can keep it out of the connector's config
 * and Debezium's start-up log. Here the salt is a {@link Password} value ({@code salt.secret}), given
 * as a config provider reference that the worker resolves when it starts the task.
 *
 * <p>It runs before {@code ExtractNewRecordState}, on Debezium's envelope: both the
 * {@code before} and {@code after} images of a change event of a table that has hashed columns
 * ({@code source.schema} and {@code source.table}) are rewritten. A null stays null, and so does
 * Debezium's placeholder for a value the WAL did not carry ({@code unavailable.value}), which
 * the lake fills in from the key's previous, already hashed, value. A hashed column whose value
 * is not text stops the task, naming the column: nothing is produced for it.
 *
 * <p>Field policies ({@code fields.hashed}, {@code fields.excluded}) apply the same to a
 * top-level field of a jsonb column, which Debezium sends as its text: the field's string value
 * is hashed the same way, or the field is left out, and the rest of the text is kept as it is
 * ({@link JsonFields}). Debezium's {@code column.exclude.list} works on whole columns only.
 */
public class HashColumns<R extends ConnectRecord<R>> implements Transformation<R> {

    static final String COLUMNS = "columns";
    static final String FIELDS_HASHED = "fields.hashed";
    static final String FIELDS_EXCLUDED = "fields.excluded";
    // Named so that Debezium masks it where it logs its task's resolved config (keys ending in
    // "secret" or "password"); Connect hides it as a PASSWORD everywhere else.
    static final String SALT = "salt.secret";
    static final String UNAVAILABLE = "unavailable.value";

    static final ConfigDef CONFIG = new ConfigDef()
            .define(COLUMNS, ConfigDef.Type.LIST, List.of(), ConfigDef.Importance.HIGH,
                    "The columns to hash, each <schema>.<table>.<column>.")
            .define(FIELDS_HASHED, ConfigDef.Type.LIST, List.of(), ConfigDef.Importance.HIGH,
                    "Top-level fields of JSON columns to hash, each "
                    + "<schema>.<table>.<column>.<field>.")
            .define(FIELDS_EXCLUDED, ConfigDef.Type.LIST, List.of(), ConfigDef.Importance.HIGH,
                    "Top-level fields of JSON columns to leave out, each "
                    + "<schema>.<table>.<column>.<field>.")
            .define(SALT, ConfigDef.Type.PASSWORD, new Password(""), ConfigDef.Importance.HIGH,
                    "The salt: a config provider reference, never the value itself.")
            .define(UNAVAILABLE, ConfigDef.Type.STRING, "__debezium_unavailable_value",
                    ConfigDef.Importance.LOW,
                    "Debezium's unavailable.value.placeholder, passed on unhashed.");

    private final Map<String, Set<String>> byTable = new HashMap<>();
    // Per table, per JSON column: its fields to hash and to leave out.
    private final Map<String, Map<String, Set<String>>> hashedFields = new HashMap<>();
    private final Map<String, Map<String, Set<String>>> excludedFields = new HashMap<>();
    private byte[] salt = new byte[0];
    private String unavailable = "";

    @Override
    public void configure(Map<String, ?> configs) {
        AbstractConfig config = new AbstractConfig(CONFIG, configs);
        byTable.clear();
        for (String column : config.getList(COLUMNS)) {
            int dot = column.lastIndexOf('.');
            if (dot <= 0 || column.indexOf('.') == dot) {
                throw new ConfigException(COLUMNS, column,
                        "a hashed column is named <schema>.<table>.<column>");
            }
            byTable.computeIfAbsent(column.substring(0, dot), t -> new HashSet<>())
                    .add(column.substring(dot + 1));
        }
        hashedFields.clear();
        excludedFields.clear();
        fields(config.getList(FIELDS_HASHED), FIELDS_HASHED, hashedFields);
        fields(config.getList(FIELDS_EXCLUDED), FIELDS_EXCLUDED, excludedFields);
        String value = config.getPassword(SALT).value();
        boolean hashes = !byTable.isEmpty() || !hashedFields.isEmpty();
        if (hashes && (value.isEmpty() || value.startsWith("${"))) {
            // The reference did not resolve (the worker's provider lacks the variable or the
            // secret's key): hashing with an empty salt would make the hashes guessable.
            throw new ConfigException(SALT, "[hidden]",
                    "the salt is empty or its config provider reference did not resolve");
        }
        salt = value.getBytes(StandardCharsets.UTF_8);
        unavailable = config.getString(UNAVAILABLE);
    }

    private static void fields(List<String> names, String setting,
                               Map<String, Map<String, Set<String>>> into) {
        for (String name : names) {
            String[] parts = name.split("\\.", -1);
            if (parts.length != 4 || List.of(parts).contains("")) {
                throw new ConfigException(setting, name,
                        "a field policy is named <schema>.<table>.<column>.<field>");
            }
            into.computeIfAbsent(parts[0] + "." + parts[1], t -> new HashMap<>())
                    .computeIfAbsent(parts[2], c -> new HashSet<>()).add(parts[3]);
        }
    }

    @Override
    public R apply(R record) {
        boolean none = byTable.isEmpty() && hashedFields.isEmpty() && excludedFields.isEmpty();
        if (none || !(record.value() instanceof Struct value)
                || !isEnvelope(value.schema())) {
            return record;
        }
        Field sourceField = value.schema().field("source");
        if (sourceField == null || !(value.get(sourceField) instanceof Struct source)) {
            return record;
        }
        String table = source.schema().field("schema") == null ? null
                : source.getString("schema") + "." + source.getString("table");
        Set<String> hashed = byTable.getOrDefault(table, Set.of());
        Map<String, Set<String>> jsonHashed = hashedFields.getOrDefault(table, Map.of());
        Map<String, Set<String>> jsonExcluded = excludedFields.getOrDefault(table, Map.of());
        if (hashed.isEmpty() && jsonHashed.isEmpty() && jsonExcluded.isEmpty()) {
            return record;
        }
        Struct out = new Struct(value.schema());
        for (Field f : value.schema().fields()) {
            Object v = value.get(f);
            boolean image = f.name().equals("before") || f.name().equals("after");
            out.put(f, image && v instanceof Struct row
                    ? hashRow(row, hashed, jsonHashed, jsonExcluded, table) : v);
        }
        return record.newRecord(record.topic(), record.kafkaPartition(), record.keySchema(),
                record.key(), record.valueSchema(), out, record.timestamp(), record.headers());
    }

    private Struct hashRow(Struct row, Set<String> hashed, Map<String, Set<String>> jsonHashed,
                           Map<String, Set<String>> jsonExcluded, String table) {
        Struct out = new Struct(row.schema());
        for (Field f : row.schema().fields()) {
            Object v = row.get(f);
            boolean json = jsonHashed.containsKey(f.name()) || jsonExcluded.containsKey(f.name());
            if (v != null && json) {
                String where = table + "." + f.name();
                if (!(v instanceof String text)) {
                    throw new DataException(where + " has a field policy, but Debezium sends it "
                            + "as " + f.schema().type() + ": only jsonb columns can have one "
                            + "(cdc_lake/source/captured.py)");
                }
                if (!unavailable.equals(text)) {
                    v = JsonFields.apply(text, jsonHashed.getOrDefault(f.name(), Set.of()),
                            jsonExcluded.getOrDefault(f.name(), Set.of()), this::hash, where);
                }
            }
            if (v != null && hashed.contains(f.name())) {
                if (f.schema().type() != Schema.Type.STRING) {
                    throw new DataException(table + "." + f.name() + " is declared hashed, but "
                            + "Debezium sends it as " + f.schema().type() + ": only text columns "
                            + "can be hashed (cdc_lake/source/captured.py)");
                }
                if (!unavailable.equals(v)) {
                    v = hash((String) v);
                }
            }
            out.put(f, v);
        }
        return out;
    }

    String hash(String value) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(salt);
            return HexFormat.of().formatHex(sha.digest(value.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);  // every JVM has SHA-256
        }
    }

    private static boolean isEnvelope(Schema schema) {
        return schema != null && schema.name() != null && schema.name().endsWith(".Envelope")
                && schema.field("op") != null;
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public void close() {
    }
}
