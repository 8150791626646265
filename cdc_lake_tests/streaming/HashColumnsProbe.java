import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import io.cdclake.connect.HashColumns;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * Runs the HashColumns transform, as the source connector configures it, on jsonb texts read
 * from standard input (one per line; \N for a SQL null), each as the "after" image of a Debezium
 * change event of table s.t, column doc: doc.phone hashed, doc.fax excluded, the salt from the
 * PROBE_SALT environment variable. Prints each resulting text (\N for null), or "ERROR " and the
 * transform's message. Used by cdc_lake_tests/streaming/test_hash_columns.py.
 */
public class HashColumnsProbe {
    public static void main(String[] args) throws Exception {
        HashColumns<SourceRecord> transform = new HashColumns<>();
        transform.configure(Map.of(
                "fields.hashed", "s.t.doc.phone",
                "fields.excluded", "s.t.doc.fax",
                "salt.secret", System.getenv("PROBE_SALT")));
        Schema row = SchemaBuilder.struct().name("s.t.Value").optional()
                .field("doc", Schema.OPTIONAL_STRING_SCHEMA).build();
        Schema source = SchemaBuilder.struct().name("io.debezium.connector.postgresql.Source")
                .field("schema", Schema.STRING_SCHEMA).field("table", Schema.STRING_SCHEMA).build();
        Schema envelope = SchemaBuilder.struct().name("s.t.Envelope")
                .field("before", row).field("after", row).field("source", source)
                .field("op", Schema.STRING_SCHEMA).build();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            Struct after = new Struct(row).put("doc", line.equals("\\N") ? null : line);
            Struct value = new Struct(envelope).put("after", after).put("op", "u")
                    .put("source", new Struct(source).put("schema", "s").put("table", "t"));
            try {
                Struct changed = (Struct) transform.apply(
                        new SourceRecord(Map.of(), Map.of(), "t", null, envelope, value)).value();
                Object doc = changed.getStruct("after").get("doc");
                out.println(doc == null ? "\\N" : doc);
            } catch (DataException e) {
                out.println("ERROR " + e.getMessage());
            }
        }
    }
}
