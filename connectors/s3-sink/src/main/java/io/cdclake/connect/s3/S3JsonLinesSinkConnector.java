package io.cdclake.connect.s3;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/** Writes topics to S3 as JSON-lines objects; see {@link S3JsonLinesSinkTask} for the semantics. */
public class S3JsonLinesSinkConnector extends SinkConnector {
    static final String VERSION = versionFromManifest();

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        new S3SinkConfig(props); // fail fast on an invalid configuration
        this.props = Map.copyOf(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return S3JsonLinesSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return Collections.nCopies(maxTasks, props);
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return S3SinkConfig.CONFIG_DEF;
    }

    @Override
    public String version() {
        return VERSION;
    }

    private static String versionFromManifest() {
        String v = S3JsonLinesSinkConnector.class.getPackage().getImplementationVersion();
        return v == null ? "unknown" : v;
    }
}
