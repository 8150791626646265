package io.cdclake.connect.s3;

import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.NavigableSet;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.exception.SdkServiceException;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * Buffers each topic partition's records and uploads them to S3 as one JSON-lines object per batch.
 *
 * <p><b>Format and keys.</b> One UTF-8, newline-terminated line per record, in offset order, no
 * compression. A batch is stored at
 * {@code <file.name.prefix><topic>/partition=<p>/<topic>+<p>+<start offset, 20 digits>.jsonl}, so keys
 * increase with offsets within a partition and a reader can resume a listing with {@code StartAfter}.
 * Values with a schema that are {@code String} or {@code byte[]} (StringConverter, ByteArrayConverter)
 * are taken to be JSON text already and written as they are (line breaks, which JSON allows only as
 * whitespace, become spaces). Schemaless values (JsonConverter with {@code schemas.enable=false}) are
 * encoded as JSON. A {@code Struct} fails the task: schemas must be disabled. Null values (tombstones)
 * are skipped, or fail the task with {@code behavior.on.null.values=fail}.
 *
 * <p><b>Flushing.</b> A partition's buffer is uploaded when it holds {@code file.max.records} records,
 * or once {@code file.flush.interval.ms} has passed since its first record was buffered. The interval
 * is checked in {@link #put} and in {@link #preCommit}; on an idle topic Connect calls them at least
 * every {@code offset.flush.interval.ms}, so a remainder is uploaded within the sum of the two.
 *
 * <p><b>Offsets.</b> {@link #preCommit} returns, per partition, only the offset after the last record
 * that is in S3 (or was a skipped tombstone with nothing buffered before it), so Kafka never commits a
 * record that is not uploaded. Buffers are discarded on {@link #close} and {@link #stop}: Connect
 * redelivers those records from the committed offset.
 *
 * <p><b>Idempotency.</b> Records redelivered after a restart or rebalance are written under the key of
 * their start offset, overwriting the earlier object. If the task died after uploading objects but
 * before committing them, the first record of a reassigned partition triggers a listing of the objects
 * already stored from that offset on, and new batches are cut at those objects' start offsets; every
 * such object is therefore overwritten rather than duplicated under a new key. Within a task, records
 * at or below the highest offset already seen (a batch retried after a {@link RetriableException}) are
 * dropped, since they are buffered or uploaded already.
 */
public class S3JsonLinesSinkTask extends SinkTask {
    private static final Logger log = LoggerFactory.getLogger(S3JsonLinesSinkTask.class);

    private S3SinkConfig config;
    private S3Client s3;
    private final Map<TopicPartition, PartitionState> partitions = new HashMap<>();

    /** One topic partition: its buffered batch and its upload progress. */
    private static final class PartitionState {
        final ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        final NavigableSet<Long> existingStarts; // start offsets of objects stored before this task saw them
        int count;             // records in the buffer
        long startOffset;      // offset of the buffer's first record: the object's key
        long firstBufferedAt;  // wall clock when that record was buffered
        long lastSeen = -1;    // highest offset handled; lower ones are redeliveries
        long committable = -1; // every offset below this is in S3 (or skipped); -1: nothing yet

        PartitionState(NavigableSet<Long> existingStarts) {
            this.existingStarts = existingStarts;
        }
    }

    @Override
    public String version() {
        return S3JsonLinesSinkConnector.VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        config = new S3SinkConfig(props);
        s3 = buildClient(config);
        String where = config.endpoint() != null ? "endpoint " + config.endpoint()
            : "AWS S3 (region " + config.region() + ")";
        try {
            s3.headBucket(b -> b.bucket(config.bucket()));
        } catch (SdkException e) {
            boolean missing = e instanceof SdkServiceException se && se.statusCode() == 404;
            s3.close();
            throw new ConnectException("S3 bucket '" + config.bucket() + "' " + (missing ? "does not exist" : "is not accessible")
                + " at " + where + ": " + e.getMessage(), e);
        }
        log.info("Writing JSON-lines objects to s3://{}/{} at {}", config.bucket(), config.prefix(), where);
    }

    private static S3Client buildClient(S3SinkConfig c) {
        S3ClientBuilder b = S3Client.builder()
            .httpClientBuilder(UrlConnectionHttpClient.builder())
            .region(Region.of(c.region()))
            .forcePathStyle(c.pathStyle());
        if ((c.accessKeyId() == null) != (c.secretAccessKey() == null)) {
            throw new ConnectException("Set both " + S3SinkConfig.ACCESS_KEY_ID + " and " + S3SinkConfig.SECRET_ACCESS_KEY
                + ", or neither to use the AWS default credentials chain");
        }
        b.credentialsProvider(c.accessKeyId() != null
            ? StaticCredentialsProvider.create(AwsBasicCredentials.create(c.accessKeyId(), c.secretAccessKey()))
            : DefaultCredentialsProvider.builder().build());
        if (c.endpoint() != null) {
            // S3-compatible servers often lack the flexible checksums the SDK sends AWS by default.
            b.endpointOverride(URI.create(c.endpoint()))
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED);
        }
        return b.build();
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        for (SinkRecord r : records) {
            TopicPartition tp = new TopicPartition(r.topic(), r.kafkaPartition());
            long offset = r.kafkaOffset();
            PartitionState st = partitions.get(tp);
            if (st == null) {
                st = new PartitionState(existingStarts(tp, offset));
                partitions.put(tp, st);
            }
            if (offset <= st.lastSeen) {
                continue;
            }
            boolean atStoredBoundary = !st.existingStarts.isEmpty() && st.existingStarts.first() <= offset;
            st.existingStarts.headSet(offset, true).clear();
            if (st.count > 0 && (st.count >= config.maxRecords() || atStoredBoundary)) {
                upload(tp, st);
            }
            if (r.value() != null) {
                byte[] line = (jsonLine(r, tp) + "\n").getBytes(StandardCharsets.UTF_8);
                if (st.count == 0) {
                    st.startOffset = offset;
                    st.firstBufferedAt = System.currentTimeMillis();
                }
                st.buffer.writeBytes(line);
                st.count++;
            } else if (config.failOnNullValues()) {
                throw new DataException("Null value (tombstone) in " + tp + " at offset " + offset
                    + " and " + S3SinkConfig.ON_NULL_VALUES + "=fail");
            }
            st.lastSeen = offset;
            if (st.count == 0) {
                st.committable = offset + 1;
            }
        }
        uploadDue();
    }

    @Override
    public Map<TopicPartition, OffsetAndMetadata> preCommit(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
        try {
            uploadDue();
        } catch (ConnectException e) {
            // Throwing here would make Connect rewind the consumer; the next put() retries the upload.
            log.warn("Upload during offset commit failed; it is retried on the next put", e);
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        partitions.forEach((tp, st) -> {
            if (st.committable >= 0) {
                offsets.put(tp, new OffsetAndMetadata(st.committable));
            }
        });
        return offsets;
    }

    @Override
    public void close(Collection<TopicPartition> closed) {
        closed.forEach(partitions::remove); // unflushed records are redelivered to the next owner
    }

    @Override
    public void stop() {
        partitions.clear();
        if (s3 != null) {
            s3.close();
        }
    }

    private void uploadDue() {
        long now = System.currentTimeMillis();
        for (Map.Entry<TopicPartition, PartitionState> e : partitions.entrySet()) {
            PartitionState st = e.getValue();
            if (st.count >= config.maxRecords() || (st.count > 0 && now - st.firstBufferedAt >= config.flushIntervalMs())) {
                upload(e.getKey(), st);
            }
        }
    }

    private void upload(TopicPartition tp, PartitionState st) {
        String key = objectKey(tp, st.startOffset);
        try {
            s3.putObject(b -> b.bucket(config.bucket()).key(key).contentType("application/x-ndjson"),
                RequestBody.fromBytes(st.buffer.toByteArray()));
        } catch (SdkException e) {
            throw s3Failure("Failed to upload " + st.count + " records of " + tp + " to s3://" + config.bucket() + "/" + key, e);
        }
        log.debug("Uploaded {} records of {} to s3://{}/{}", st.count, tp, config.bucket(), key);
        st.committable = st.lastSeen + 1;
        st.buffer.reset();
        st.count = 0;
    }

    private String partitionPrefix(TopicPartition tp) {
        return config.prefix() + tp.topic() + "/partition=" + tp.partition() + "/" + tp.topic() + "+" + tp.partition() + "+";
    }

    private String objectKey(TopicPartition tp, long startOffset) {
        return partitionPrefix(tp) + String.format("%020d", startOffset) + ".jsonl";
    }

    /** Start offsets of objects already stored for {@code tp} at or after {@code fromOffset}. */
    private NavigableSet<Long> existingStarts(TopicPartition tp, long fromOffset) {
        String prefix = partitionPrefix(tp);
        ListObjectsV2Request.Builder req = ListObjectsV2Request.builder().bucket(config.bucket()).prefix(prefix);
        if (fromOffset > 0) {
            req.startAfter(objectKey(tp, fromOffset - 1));
        }
        NavigableSet<Long> starts = new TreeSet<>();
        try {
            for (S3Object o : s3.listObjectsV2Paginator(req.build()).contents()) {
                String name = o.key().substring(prefix.length());
                if (name.matches("\\d{20}\\.jsonl")) {
                    starts.add(Long.parseLong(name.substring(0, 20)));
                }
            }
        } catch (SdkException e) {
            throw s3Failure("Failed to list s3://" + config.bucket() + "/" + prefix, e);
        }
        if (!starts.isEmpty()) {
            log.info("{} objects of {} from offset {} on are already in S3; batches are aligned to overwrite them",
                starts.size(), tp, fromOffset);
        }
        return starts;
    }

    private static ConnectException s3Failure(String message, SdkException e) {
        boolean transientError = e instanceof SdkClientException
            || (e instanceof SdkServiceException se && (se.statusCode() >= 500 || se.isThrottlingException()));
        return transientError ? new RetriableException(message + ": " + e.getMessage(), e)
            : new ConnectException(message + ": " + e.getMessage(), e);
    }

    private static String jsonLine(SinkRecord r, TopicPartition tp) {
        Object v = r.value();
        if (v instanceof Struct) {
            throw new DataException("Record value in " + tp + " at offset " + r.kafkaOffset() + " is a Struct: schemas must be"
                + " disabled: use StringConverter, or JsonConverter with value.converter.schemas.enable=false");
        }
        if (v instanceof byte[] bytes) {
            v = new String(bytes, StandardCharsets.UTF_8);
        } else if (!(v instanceof String) || r.valueSchema() == null) {
            StringBuilder sb = new StringBuilder();
            writeJson(sb, v);
            return sb.toString();
        }
        return ((String) v).strip().replace('\r', ' ').replace('\n', ' ');
    }

    /** Encodes what JsonConverter produces without schemas: maps, lists, strings, numbers, booleans, null. */
    static void writeJson(StringBuilder sb, Object v) {
        if (v == null || (v instanceof Double d && !Double.isFinite(d)) || (v instanceof Float f && !Float.isFinite(f))) {
            sb.append("null");
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map<?, ?> map) {
            sb.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : map.entrySet()) {
                sb.append(sep);
                writeJson(sb, String.valueOf(e.getKey()));
                sb.append(':');
                writeJson(sb, e.getValue());
                sep = ",";
            }
            sb.append('}');
        } else if (v instanceof Collection<?> list) {
            sb.append('[');
            String sep = "";
            for (Object item : list) {
                sb.append(sep);
                writeJson(sb, item);
                sep = ",";
            }
            sb.append(']');
        } else {
            String s = v instanceof byte[] bytes ? Base64.getEncoder().encodeToString(bytes) : v.toString();
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                    }
                }
            }
            sb.append('"');
        }
    }
}
