package io.cdclake.spark.ui;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;

import javax.servlet.Filter;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ServletException;
import javax.servlet.ServletRequest;
import javax.servlet.ServletResponse;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

/**
 * A Spark web UI that serves only the holder of a token: {@code Authorization: Bearer <token>},
 * where the token is the content of the file that the filter's {@code tokenFile} parameter names
 * ({@code spark.io.cdclake.spark.ui.TokenFilter.param.tokenFile}). The file is read once, at
 * start; its mode (0600) is what keeps the token from other local users, and its path is the
 * only thing in any configuration. Any other request gets 401 before Spark sees it: the pages,
 * the JSON API, the log pages of the workers and the kill links alike.
 */
public final class TokenFilter implements Filter {
    private byte[] expected;

    @Override
    public void init(FilterConfig config) throws ServletException {
        String file = config.getInitParameter("tokenFile");
        if (file == null || file.isBlank()) {
            throw new ServletException("TokenFilter: no tokenFile parameter");
        }
        try {
            expected = ("Bearer " + Files.readString(Path.of(file)).strip())
                .getBytes(StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ServletException("TokenFilter: cannot read the token file " + file, e);
        }
        if (expected.length <= "Bearer ".length()) {
            throw new ServletException("TokenFilter: the token file " + file + " is empty");
        }
    }

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        String given = ((HttpServletRequest) request).getHeader("Authorization");
        byte[] got = given == null ? new byte[0] : given.getBytes(StandardCharsets.UTF_8);
        // Constant time in the token's content: the comparison does not say how much matched.
        if (MessageDigest.isEqual(got, expected)) {
            chain.doFilter(request, response);
            return;
        }
        HttpServletResponse http = (HttpServletResponse) response;
        http.setHeader("WWW-Authenticate", "Bearer realm=\"cdc-lake spark\"");
        http.sendError(HttpServletResponse.SC_UNAUTHORIZED);
    }

    @Override
    public void destroy() {
    }
}
