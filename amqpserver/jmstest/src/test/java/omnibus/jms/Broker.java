package omnibus.jms;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.qpid.jms.JmsConnectionExtensions;
import org.apache.qpid.jms.JmsConnectionFactory;

/**
 * One running omnibus process: its ports, its log, and Qpid JMS connection
 * factories made the way Microsoft's azure-servicebus-jms library makes
 * them. Made by {@link OmnibusExtension}; stopped (SIGTERM, then SIGKILL
 * after 5 s) by {@link #stop()}, and killed by a shutdown hook if the JVM
 * exits first.
 */
public final class Broker {
    /** The shared access key every broker starts with (the emulator's). */
    public static final String KEY_NAME = "RootManageSharedAccessKey";
    public static final String KEY = "SAS_KEY_VALUE";

    private static final Duration READY_TIMEOUT = Duration.ofSeconds(30);
    private static final int TAIL_LINES = 200;
    private static final Set<Process> RUNNING = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly)));
    }

    public final String host = "127.0.0.1";
    public final int amqpPort;
    public final int amqpsPort;
    /** The CA certificate (PEM) the AMQPS listener's certificate chains to. */
    public final Path caPath;
    private final Process process;
    private final Path dir;
    private final Deque<String> tail = new ArrayDeque<>();

    private Broker(Process process, Path dir, int amqpPort, int amqpsPort, Path caPath) {
        this.process = process;
        this.dir = dir;
        this.amqpPort = amqpPort;
        this.amqpsPort = amqpsPort;
        this.caPath = caPath;
    }

    /**
     * Starts omnibus with --memory and the entities on free loopback ports
     * and waits until it logs "omnibus is ready".
     */
    static Broker start(Run run, Entities entities) throws Exception {
        Path dir = Files.createTempDirectory("omnibus-jmstest-");
        Path config = dir.resolve("Config.json");
        Files.writeString(config, entities.toJson());
        String host = "127.0.0.1";
        int amqp = freePort(host), amqps = freePort(host);
        List<String> cmd = new ArrayList<>(List.of(run.binary.toString(), "--memory", "--data", dir.toString(),
            "--config", config.toString(), "--key-name", KEY_NAME, "--key", KEY,
            "--amqp-addr", host + ":" + amqp, "--amqps-addr", host + ":" + amqps,
            "--http-addr", host + ":" + freePort(host), "--https-addr", host + ":" + freePort(host),
            "--tls-dir", run.tlsDir.toString(), "--metrics-addr", "127.0.0.1:0"));
        String level = System.getenv("OMNIBUS_JMSTEST_LOG_LEVEL");
        if (level != null && !level.isEmpty()) {
            cmd.addAll(List.of("--log-level", level));
        }
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true);
        pb.environment().keySet().removeIf(k -> k.startsWith("OMNIBUS_JMSTEST"));
        Process p = pb.start();
        RUNNING.add(p);
        Broker b = new Broker(p, dir, amqp, amqps, run.caPath);
        CompletableFuture<Void> ready = new CompletableFuture<>();
        boolean echo = "1".equals(System.getenv("OMNIBUS_JMSTEST_LOG"));
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null;) {
                    b.log(line);
                    if (echo) {
                        System.err.println("omnibus: " + line);
                    }
                    if (line.contains("omnibus is ready")) {
                        ready.complete(null);
                    }
                }
            } catch (IOException ignored) {
                // the process is gone
            }
            ready.completeExceptionally(new IllegalStateException("omnibus exited before it was ready"));
        }, "omnibus-log-" + p.pid());
        reader.setDaemon(true);
        reader.start();
        try {
            ready.get(READY_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            b.waitForPort(amqp);
        } catch (Exception e) {
            b.stop();
            throw new IllegalStateException("omnibus did not start: " + e + "\n" + b.tail(30), e);
        }
        return b;
    }

    /**
     * A Qpid JMS connection factory on plain AMQP, logging in with SASL
     * PLAIN as the key's name and the key, with what azure-servicebus-jms
     * adds: prefetch 0 (jms.prefetchPolicy.all=0) and the open properties
     * com.microsoft:is-client-provider and user-agent.
     */
    public JmsConnectionFactory factory() {
        return factory("amqp://" + host + ":" + amqpPort + "?jms.prefetchPolicy.all=0");
    }

    /**
     * A plain Qpid JMS connection factory: SASL PLAIN with the key, without
     * what azure-servicebus-jms adds (so no entity is made on the fly).
     */
    public JmsConnectionFactory plainFactory() {
        return new JmsConnectionFactory(KEY_NAME, KEY, "amqp://" + host + ":" + amqpPort);
    }

    /** The same on any URI (amqps://, query options). */
    public static JmsConnectionFactory factory(String uri) {
        JmsConnectionFactory f = new JmsConnectionFactory(KEY_NAME, KEY, uri);
        f.setExtension(JmsConnectionExtensions.AMQP_OPEN_PROPERTIES.toString(),
            (connection, remote) -> Map.of("com.microsoft:is-client-provider", true, "user-agent", "omnibus-jmstest"));
        return f;
    }

    /** The last lines the broker logged. */
    public synchronized String tail(int lines) {
        List<String> all = new ArrayList<>(tail);
        return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
    }

    /** Stops the broker: SIGTERM, SIGKILL after 5 s; removes its directory. */
    public void stop() {
        process.destroy();
        try {
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        RUNNING.remove(process);
        deleteTree(dir);
    }

    private synchronized void log(String line) {
        tail.addLast(line);
        while (tail.size() > TAIL_LINES) {
            tail.removeFirst();
        }
    }

    private void waitForPort(int port) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        for (;;) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(host, port), 1000);
                return;
            } catch (IOException e) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("omnibus is ready but nothing listens on " + host + ":" + port, e);
                }
                Thread.sleep(50);
            }
        }
    }

    static int freePort(String host) throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName(host))) {
            return s.getLocalPort();
        }
    }

    static void deleteTree(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
