package io.cdclake.connect;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.UnaryOperator;

import org.apache.kafka.connect.errors.DataException;

/**
 * Field policies on the top-level fields of one JSON object's text: an excluded field is left
 * out, a hashed field's string value is replaced by its hash. Everything else is kept byte for
 * byte, so a jsonb value as PostgreSQL prints it (keys in jsonb's order, {@code ", "} and
 * {@code ": "} between them) stays exactly what PostgreSQL prints for the same policies applied
 * to the value ({@code jsonb - 'field'}, {@code jsonb_set}); the lake's digest relies on that
 * ({@code cdc_lake/lake/digest.py}).
 *
 * <p>A value that is not an object (an array, a scalar) is returned as it is. A hashed field
 * whose value is null stays null; one holding anything but a string or null is an error naming
 * the field, so nothing is produced for the record.
 */
final class JsonFields {

    private JsonFields() {
    }

    /** One member of the object: where its key starts and its value starts and ends. */
    private record Member(String key, int start, int valueStart, int valueEnd) {
    }

    static String apply(String json, Set<String> hashed, Set<String> excluded,
                        UnaryOperator<String> hash, String where) {
        int i = skipSpace(json, 0);
        if (i >= json.length() || json.charAt(i) != '{') {
            return json;
        }
        List<Member> members = new ArrayList<>();
        i = skipSpace(json, i + 1);
        if (i < json.length() && json.charAt(i) == '}') {
            return json;
        }
        while (true) {
            if (i >= json.length() || json.charAt(i) != '"') {
                throw malformed(where, i);
            }
            int start = i;
            int keyEnd = skipString(json, i, where);
            String key = decode(json, start, keyEnd, where);
            i = skipSpace(json, keyEnd);
            if (i >= json.length() || json.charAt(i) != ':') {
                throw malformed(where, i);
            }
            int valueStart = skipSpace(json, i + 1);
            int valueEnd = skipValue(json, valueStart, where);
            members.add(new Member(key, start, valueStart, valueEnd));
            i = skipSpace(json, valueEnd);
            if (i < json.length() && json.charAt(i) == ',') {
                i = skipSpace(json, i + 1);
            } else if (i < json.length() && json.charAt(i) == '}') {
                break;
            } else {
                throw malformed(where, i);
            }
        }
        StringBuilder out = new StringBuilder(json.length());
        out.append(json, 0, members.get(0).start());
        boolean first = true;
        for (int m = 0; m < members.size(); m++) {
            Member member = members.get(m);
            if (excluded.contains(member.key())) {
                continue;
            }
            if (!first) {
                // The separator before it in the text (a member after the first has one).
                out.append(json, members.get(m - 1).valueEnd(), member.start());
            }
            first = false;
            out.append(json, member.start(), member.valueStart());
            String value = json.substring(member.valueStart(), member.valueEnd());
            if (hashed.contains(member.key()) && !value.equals("null")) {
                if (value.charAt(0) != '"') {
                    throw new DataException(where + "." + member.key() + " is declared hashed, "
                            + "but its value is not a string: only string fields can be hashed "
                            + "(cdc_lake/source/captured.py)");
                }
                value = "\"" + hash.apply(decode(json, member.valueStart(), member.valueEnd(),
                        where)) + "\"";
            }
            out.append(value);
        }
        out.append(json, members.get(members.size() - 1).valueEnd(), json.length());
        return out.toString();
    }

    private static int skipSpace(String s, int i) {
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
            i++;
        }
        return i;
    }

    /** The index just past the string starting at {@code i} (its opening quote). */
    private static int skipString(String s, int i, String where) {
        for (int j = i + 1; j < s.length(); j++) {
            char c = s.charAt(j);
            if (c == '\\') {
                j++;
            } else if (c == '"') {
                return j + 1;
            }
        }
        throw malformed(where, i);
    }

    /** The index just past the value starting at {@code i}. */
    private static int skipValue(String s, int i, String where) {
        if (i >= s.length()) {
            throw malformed(where, i);
        }
        char c = s.charAt(i);
        if (c == '"') {
            return skipString(s, i, where);
        }
        if (c == '{' || c == '[') {
            int depth = 0;
            for (int j = i; j < s.length(); j++) {
                char d = s.charAt(j);
                if (d == '"') {
                    j = skipString(s, j, where) - 1;
                } else if (d == '{' || d == '[') {
                    depth++;
                } else if ((d == '}' || d == ']') && --depth == 0) {
                    return j + 1;
                }
            }
            throw malformed(where, i);
        }
        int j = i;
        while (j < s.length() && ",}] \t\r\n".indexOf(s.charAt(j)) < 0) {
            j++;
        }
        if (j == i) {
            throw malformed(where, i);
        }
        return j;
    }

    /** The text of the JSON string in {@code s[start, end)}, quotes included, unescaped. */
    private static String decode(String s, int start, int end, String where) {
        StringBuilder out = new StringBuilder(end - start);
        for (int j = start + 1; j < end - 1; j++) {
            char c = s.charAt(j);
            if (c != '\\') {
                out.append(c);
                continue;
            }
            char e = s.charAt(++j);
            switch (e) {
                case 'b' -> out.append('\b');
                case 'f' -> out.append('\f');
                case 'n' -> out.append('\n');
                case 'r' -> out.append('\r');
                case 't' -> out.append('\t');
                case 'u' -> {
                    if (j + 4 >= end) {
                        throw malformed(where, j);
                    }
                    // A surrogate pair arrives as two escapes, appended in turn. A bad escape
                    // is reported by position: its digits may be part of the value.
                    try {
                        out.append((char) Integer.parseInt(s.substring(j + 1, j + 5), 16));
                    } catch (NumberFormatException bad) {
                        throw malformed(where, j);
                    }
                    j += 4;
                }
                default -> out.append(e);  // \" \\ \/
            }
        }
        return out.toString();
    }

    private static DataException malformed(String where, int at) {
        return new DataException(where + " has a field policy, but its value is not valid JSON "
                + "(at character " + at + ")");
    }
}
