package omnibus;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The entities one test class's broker starts with, written as the
 * emulator's Config.json (core/emuconfig reads it). Each test uses
 * entities of its own, so tests never share state.
 */
public final class Entities {
    private final List<Object> queues = new ArrayList<>();
    private final List<Object> topics = new ArrayList<>();
    private final List<Object> namespaces = new ArrayList<>();

    /**
     * A further namespace (after the default one) with shared access rules
     * (see {@link #rule}; none: the broker's root key) and queues.
     */
    public Entities namespace(String name, List<Map<String, Object>> rules, String... queueNames) {
        List<Object> qs = new ArrayList<>();
        for (String q : queueNames) {
            qs.add(Map.of("Name", q, "Properties", Map.of()));
        }
        namespaces.add(Map.of("Name", name, "AuthorizationRules", rules, "Queues", qs));
        return this;
    }

    /** A shared access authorization rule: key name, key and rights ("Send", "Listen", "Manage"). */
    public static Map<String, Object> rule(String keyName, String key, String... rights) {
        return Map.of("KeyName", keyName, "PrimaryKey", key, "Rights", List.of(rights));
    }

    /** A queue with the broker's defaults. */
    public Entities queue(String name) {
        return queue(name, Map.of());
    }

    /** A queue with Config.json properties, e.g. {@code Map.of("LockDuration", "PT5S")}. */
    public Entities queue(String name, Map<String, Object> properties) {
        queues.add(Map.of("Name", name, "Properties", properties));
        return this;
    }

    /** A topic with its subscriptions (see {@link #subscription}). */
    @SafeVarargs
    public final Entities topic(String name, Map<String, Object>... subscriptions) {
        topics.add(Map.of("Name", name, "Properties", Map.of(), "Subscriptions", List.of(subscriptions)));
        return this;
    }

    /** A subscription with properties and rules (see {@link #sqlRule}, {@link #correlationRule}). */
    @SafeVarargs
    public static Map<String, Object> subscription(String name, Map<String, Object> properties,
        Map<String, Object>... rules) {
        return Map.of("Name", name, "Properties", properties, "Rules", List.of(rules));
    }

    /** A rule with a SQL filter and, unless null, a SQL action. */
    public static Map<String, Object> sqlRule(String name, String filter, String action) {
        Map<String, Object> props = new LinkedHashMap<>();
        props.put("FilterType", "Sql");
        props.put("SqlFilter", Map.of("SqlExpression", filter));
        if (action != null) {
            props.put("Action", Map.of("SqlExpression", action));
        }
        return Map.of("Name", name, "Properties", props);
    }

    /** A rule with a correlation filter, e.g. {@code Map.of("CorrelationId", "order")}. */
    public static Map<String, Object> correlationRule(String name, Map<String, Object> filter) {
        return Map.of("Name", name, "Properties", Map.of("FilterType", "Correlation", "CorrelationFilter", filter));
    }

    /** The Config.json text. */
    public String toJson() {
        Map<String, Object> ns = new LinkedHashMap<>();
        ns.put("Name", "sbemulatorns");
        ns.put("Queues", queues);
        ns.put("Topics", topics);
        Map<String, Object> user = new LinkedHashMap<>();
        List<Object> all = new ArrayList<>(List.of(ns));
        all.addAll(namespaces);
        user.put("Namespaces", all);
        user.put("Logging", Map.of("Type", "Console"));
        StringBuilder sb = new StringBuilder();
        write(sb, Map.of("UserConfig", user));
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v) {
        if (v instanceof Map<?, ?> m) {
            sb.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : m.entrySet()) {
                sb.append(sep);
                write(sb, e.getKey().toString());
                sb.append(':');
                write(sb, e.getValue());
                sep = ",";
            }
            sb.append('}');
        } else if (v instanceof List<?> l) {
            sb.append('[');
            String sep = "";
            for (Object o : l) {
                sb.append(sep);
                write(sb, o);
                sep = ",";
            }
            sb.append(']');
        } else if (v instanceof String s) {
            sb.append('"');
            for (char c : s.toCharArray()) {
                if (c == '"' || c == '\\') {
                    sb.append('\\').append(c);
                } else if (c < 0x20) {
                    sb.append(String.format("\\u%04x", (int) c));
                } else {
                    sb.append(c);
                }
            }
            sb.append('"');
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else {
            throw new IllegalArgumentException("not JSON: " + v);
        }
    }
}
