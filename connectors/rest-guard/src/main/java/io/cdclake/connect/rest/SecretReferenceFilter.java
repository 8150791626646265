package io.cdclake.connect.rest;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import jakarta.ws.rs.container.ContainerRequestContext;
import jakarta.ws.rs.container.ContainerRequestFilter;
import jakarta.ws.rs.container.PreMatching;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Checks the connector config in every request that carries one: POST /connectors, PUT
 * /connectors/{name}/config and PUT /connector-plugins/{plugin}/config/validate. The body is
 * read, checked against the rule, and put back for Connect to read.
 */
@PreMatching
final class SecretReferenceFilter implements ContainerRequestFilter {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final GuardRule rule;

    SecretReferenceFilter(GuardRule rule) {
        this.rule = rule;
    }

    @Override
    public void filter(ContainerRequestContext request) throws IOException {
        String method = request.getMethod();
        String[] path = request.getUriInfo().getPath().replaceAll("^/+|/+$", "").split("/");
        boolean connectorConfig = path.length == 3 && path[0].equals("connectors") && path[2].equals("config");
        if (method.equals("PATCH") && connectorConfig) {
            refuse(request, "PATCH of a connector config is refused on this worker: PUT the whole config");
            return;
        }
        boolean create = method.equals("POST") && path.length == 1 && path[0].equals("connectors");
        boolean put = method.equals("PUT") && connectorConfig;
        boolean validate = method.equals("PUT") && path.length == 4 && path[0].equals("connector-plugins")
            && path[2].equals("config") && path[3].equals("validate");
        if (!(create || put || validate)) {
            return;
        }
        byte[] body = request.getEntityStream().readAllBytes();
        request.setEntityStream(new ByteArrayInputStream(body));
        JsonNode root;
        try {
            root = JSON.readTree(body);
        } catch (IOException e) {
            return; // not JSON: Connect answers it with its own error
        }
        JsonNode config = create ? root.path("config") : root;
        if (!config.isObject()) {
            return;
        }
        Map<String, String> values = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = config.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            values.put(e.getKey(), e.getValue().isNull() ? null : e.getValue().asText());
        }
        String why = rule.violation(values, validate ? path[1] : null);
        if (why != null) {
            refuse(request, why);
        }
    }

    private static void refuse(ContainerRequestContext request, String message) {
        Map<String, Object> error = new LinkedHashMap<>();
        error.put("error_code", 400);
        error.put("message", message);
        request.abortWith(Response.status(400).type(MediaType.APPLICATION_JSON).entity(error).build());
    }
}
