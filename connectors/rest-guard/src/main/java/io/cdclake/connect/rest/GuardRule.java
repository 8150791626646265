package io.cdclake.connect.rest;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Which connector config may hold the allowed secret references, and where they must be: the
 * replication password in one key of one connector class, pointed at the stack's database;
 * and, if the worker names one, the column-hashing salt in the {@code salt.secret} of a
 * {@code HashColumns} transform, which only ever hashes with it (it never writes the salt out).
 */
final class GuardRule {
    static final String PREFIX = "cdclake.guard.";
    static final String PINNED = PREFIX + "pinned.";
    static final String HASH_TRANSFORM = "io.cdclake.connect.HashColumns";
    private static final Pattern TRANSFORM_SALT = Pattern.compile("transforms\\.([^.]+)\\.salt\\.secret");

    final String reference;
    final String key;
    final String connectorClass;
    final Map<String, String> pinned;
    final String saltReference;  // null: no salt reference is allowed

    GuardRule(String reference, String key, String connectorClass, Map<String, String> pinned,
              String saltReference) {
        this.reference = reference;
        this.key = key;
        this.connectorClass = connectorClass;
        this.pinned = pinned;
        this.saltReference = saltReference;
    }

    static GuardRule from(Map<String, ?> configs) {
        Map<String, String> pinned = new TreeMap<>();
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            if (e.getKey().startsWith(PINNED)) {
                pinned.put(e.getKey().substring(PINNED.length()), String.valueOf(e.getValue()));
            }
        }
        // Built here: written whole in the worker's properties, the worker would resolve it.
        String reference = "${" + required(configs, "secret.provider") + ":"
            + required(configs, "secret.variable") + "}";
        Object saltVariable = configs.get(PREFIX + "salt.variable");
        String salt = saltVariable == null || String.valueOf(saltVariable).isBlank() ? null
            : "${" + required(configs, "secret.provider") + ":" + saltVariable + "}";
        return new GuardRule(reference, required(configs, "secret.key"),
            required(configs, "connector.class"), pinned, salt);
    }

    private static String required(Map<String, ?> configs, String name) {
        Object value = configs.get(PREFIX + name);
        if (value == null || String.valueOf(value).isBlank()) {
            throw new IllegalArgumentException(
                "worker property " + PREFIX + name + " is required by " + SecretReferenceGuard.class.getName());
        }
        return String.valueOf(value);
    }

    /** Null when the config is allowed, else why not (names the field; never a resolved value). */
    String violation(Map<String, String> config, String pluginInPath) {
        for (Map.Entry<String, String> e : config.entrySet()) {
            String value = e.getValue();
            if (value == null || !value.contains("${")) {
                continue;
            }
            boolean password = e.getKey().equals(key) && value.equals(reference);
            boolean salt = isSaltOfHashTransform(e.getKey(), value, config);
            String cls = config.get("connector.class");
            boolean allowedClass = isAllowedClass(cls) && (pluginInPath == null || isAllowedClass(pluginInPath));
            if (!((password || salt) && allowedClass)) {
                return "config provider reference in '" + e.getKey() + "' refused: on this worker "
                    + "only '" + key + "' of " + connectorClass + " may hold one, and only " + reference
                    + (saltReference == null ? "" : "; and the salt.secret of a HashColumns transform "
                        + "of that connector, only " + saltReference);
            }
            // Either secret only with the connector pointed at the stack's database: the salt
            // then hashes nothing but the stack's own rows, into the stack's own topics.
            for (Map.Entry<String, String> pin : pinned.entrySet()) {
                if (!pin.getValue().equals(config.get(pin.getKey()))) {
                    return "'" + e.getKey() + "' holds a secret of the stack, so '" + pin.getKey()
                        + "' must be " + pin.getValue() + " (the stack's database)";
                }
            }
        }
        return null;
    }

    /** The salt's reference in the salt.secret of a HashColumns transform that the connector
     * runs: its alias is listed in "transforms" (an alias with a dot could make another
     * transform's property look like one). */
    private boolean isSaltOfHashTransform(String name, String value, Map<String, String> config) {
        Matcher m = TRANSFORM_SALT.matcher(name);
        if (saltReference == null || !value.equals(saltReference) || !m.matches()) {
            return false;
        }
        String alias = m.group(1);
        List<String> listed = Arrays.stream(config.getOrDefault("transforms", "").split(","))
            .map(String::trim).toList();
        return listed.contains(alias) && listed.stream().noneMatch(a -> a.contains("."))
            && HASH_TRANSFORM.equals(config.get("transforms." + alias + ".type"));
    }

    private boolean isAllowedClass(String name) {
        if (name == null) {
            return false;
        }
        String simple = connectorClass.substring(connectorClass.lastIndexOf('.') + 1);
        return name.equals(connectorClass) || name.equals(simple)
            || name.equals(simple.replaceFirst("Connector$", ""));
    }
}
