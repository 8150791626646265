package io.cdclake.connect.rest;

import java.util.Map;
import org.apache.kafka.connect.rest.ConnectRestExtension;
import org.apache.kafka.connect.rest.ConnectRestExtensionContext;

/**
 * A Kafka Connect REST extension: connector configs may name a config provider's secret only
 * where the stack put one, so no caller can have the worker resolve a secret into a field it
 * echoes (the validate endpoint returns values and quotes them in errors) or send it elsewhere.
 *
 * <p>Worker properties (the variable's name, never its value):
 * <ul>
 *   <li>{@code cdclake.guard.secret.provider} and {@code cdclake.guard.secret.variable}: the one
 *       reference allowed, {@code ${provider:variable}};
 *   <li>{@code cdclake.guard.secret.key}: the one field that may hold it;
 *   <li>{@code cdclake.guard.connector.class}: the one connector class whose config may hold it;
 *   <li>{@code cdclake.guard.pinned.<field>=<value>}: fields that must have these values wherever
 *       the reference is (the database's host and port), so it is never sent to another server;
 *   <li>{@code cdclake.guard.salt.variable} (optional): a second reference allowed,
 *       {@code ${provider:variable}}, the salt of hashed columns, only in the
 *       {@code salt.secret} of a {@code io.cdclake.connect.HashColumns} transform listed in the
 *       same connector's {@code transforms}, with the same class and pinned fields.
 * </ul>
 * A request that breaks a rule gets 400 naming the field; PATCH of a connector config is
 * refused, as a patch could move a configured connector to another server.
 */
public class SecretReferenceGuard implements ConnectRestExtension {
    private GuardRule rule;

    @Override
    public void configure(Map<String, ?> configs) {
        rule = GuardRule.from(configs);
    }

    @Override
    public void register(ConnectRestExtensionContext context) {
        context.configurable().register(new SecretReferenceFilter(rule));
    }

    @Override
    public void close() {}

    @Override
    public String version() {
        return "0.1.0";
    }
}
