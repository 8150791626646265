package io.cdclake.connect.s3;

import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Range;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigDef.ValidString;
import org.apache.kafka.common.config.types.Password;

/** Configuration of the S3 JSON-lines sink; key names follow Aiven's S3 sink where one exists. */
public class S3SinkConfig extends AbstractConfig {
    public static final String BUCKET = "aws.s3.bucket.name";
    public static final String PREFIX = "file.name.prefix";
    public static final String ENDPOINT = "aws.s3.endpoint";
    public static final String PATH_STYLE = "aws.s3.path.style.access.enabled";
    public static final String REGION = "aws.s3.region";
    public static final String ACCESS_KEY_ID = "aws.access.key.id";
    public static final String SECRET_ACCESS_KEY = "aws.secret.access.key";
    public static final String MAX_RECORDS = "file.max.records";
    public static final String FLUSH_INTERVAL_MS = "file.flush.interval.ms";
    public static final String ON_NULL_VALUES = "behavior.on.null.values";

    public static final ConfigDef CONFIG_DEF = new ConfigDef()
        .define(BUCKET, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
            Importance.HIGH, "S3 bucket the objects are written to; it must already exist.")
        .define(PREFIX, Type.STRING, "", Importance.MEDIUM,
            "Prepended to every object key, e.g. 'cdc/'.")
        .define(ENDPOINT, Type.STRING, null, Importance.MEDIUM,
            "Endpoint URL of an S3-compatible server, e.g. http://127.0.0.1:9000. Empty: AWS S3.")
        .define(PATH_STYLE, Type.BOOLEAN, false, Importance.LOW,
            "Use path-style requests (endpoint/bucket/key), as most local S3 servers need.")
        .define(REGION, Type.STRING, "us-east-1", Importance.MEDIUM, "AWS region of the bucket.")
        .define(ACCESS_KEY_ID, Type.PASSWORD, null, Importance.MEDIUM,
            "Static access key id. Empty: the AWS SDK default credentials chain (env, profile, IAM role).")
        .define(SECRET_ACCESS_KEY, Type.PASSWORD, null, Importance.MEDIUM,
            "Static secret access key; used together with " + ACCESS_KEY_ID + ".")
        .define(MAX_RECORDS, Type.INT, 1000, Range.atLeast(1), Importance.MEDIUM,
            "A topic partition's buffer is uploaded as one object once it holds this many records.")
        .define(FLUSH_INTERVAL_MS, Type.LONG, 10_000L, Range.atLeast(1), Importance.MEDIUM,
            "A non-empty buffer is uploaded once this long has passed since its first record was buffered.")
        .define(ON_NULL_VALUES, Type.STRING, "ignore", ValidString.in("ignore", "fail"), Importance.LOW,
            "What to do with null values (tombstones): 'ignore' skips them, 'fail' fails the task.");

    public S3SinkConfig(Map<String, String> props) {
        super(CONFIG_DEF, props);
    }

    public String bucket() { return getString(BUCKET); }
    public String prefix() { return getString(PREFIX); }
    public String endpoint() { return blankToNull(getString(ENDPOINT)); }
    public boolean pathStyle() { return getBoolean(PATH_STYLE); }
    public String region() { return getString(REGION); }
    public String accessKeyId() { return secret(ACCESS_KEY_ID); }
    public String secretAccessKey() { return secret(SECRET_ACCESS_KEY); }
    public int maxRecords() { return getInt(MAX_RECORDS); }
    public long flushIntervalMs() { return getLong(FLUSH_INTERVAL_MS); }
    public boolean failOnNullValues() { return "fail".equals(getString(ON_NULL_VALUES)); }

    private String secret(String key) {
        Password p = getPassword(key);
        return p == null ? null : blankToNull(p.value());
    }

    private static String blankToNull(String s) {
        return s == null || s.isBlank() ? null : s.trim();
    }
}
