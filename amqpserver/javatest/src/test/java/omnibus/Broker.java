package omnibus;

import com.azure.core.amqp.AmqpRetryOptions;
import com.azure.core.http.HttpPipelineCallContext;
import com.azure.core.http.HttpPipelineNextPolicy;
import com.azure.core.http.HttpPipelineNextSyncPolicy;
import com.azure.core.http.HttpResponse;
import com.azure.core.http.policy.FixedDelayOptions;
import com.azure.core.http.policy.HttpPipelinePolicy;
import com.azure.core.http.policy.RetryOptions;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClientBuilder;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.InetSocketAddress;
import java.net.MalformedURLException;
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
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import reactor.core.publisher.Mono;

/**
 * One running omnibus process: its ports, connection strings and log. Made
 * by {@link OmnibusExtension}; stopped (SIGTERM, then SIGKILL after 5 s)
 * by {@link #stop()}, and killed by a shutdown hook if the JVM exits first.
 */
public final class Broker {
    /** The shared access key every broker starts with (the emulator's). */
    public static final String KEY_NAME = "RootManageSharedAccessKey";
    public static final String KEY = "SAS_KEY_VALUE";

    /**
     * Retry options for every client: the SDK's defaults (60 s try timeout,
     * 3 retries) would turn each broker bug into minutes of waiting. The
     * maximum delay must be at least the delay plus 4 s: core-amqp's
     * RetryUtil waits the delay plus a fixed 4 s before a retry, capped at
     * the maximum, and a cap below that makes Reactor's backoff throw
     * "bound must be greater than origin" instead of retrying.
     */
    public static final AmqpRetryOptions RETRY = new AmqpRetryOptions().setMaxRetries(1)
        .setDelay(Duration.ofMillis(200))
        .setMaxDelay(Duration.ofSeconds(5))
        .setTryTimeout(Duration.ofSeconds(10));

    private static final Duration READY_TIMEOUT = Duration.ofSeconds(30);
    private static final int TAIL_LINES = 200;
    private static final Set<Process> RUNNING = ConcurrentHashMap.newKeySet();
    private static final Pattern METRICS = Pattern.compile("\"metrics\": \"([^\"]+)\"");

    private static final HttpClient HTTP = HttpClient.newHttpClient();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly)));
    }

    /** The loopback address every listener is on: 127.0.0.1, or a 127.x.y.z of its own (see on5671). */
    public final String host;
    public final int amqpPort;
    public final int amqpsPort;
    public final int httpPort;
    public final int httpsPort;
    /** The CA certificate (PEM) the TLS listeners' certificate chains to; the JVM trusts it (see Run). */
    public final Path caPath;
    private final Process process;
    private final Path dir;
    private final Deque<String> tail = new ArrayDeque<>();
    private volatile String metricsUrl;

    private Broker(Process process, Path dir, String host, int amqpPort, int amqpsPort, int httpPort, int httpsPort,
        Path caPath) {
        this.process = process;
        this.dir = dir;
        this.host = host;
        this.amqpPort = amqpPort;
        this.amqpsPort = amqpsPort;
        this.httpPort = httpPort;
        this.httpsPort = httpsPort;
        this.caPath = caPath;
    }

    /**
     * Starts omnibus with --memory and the entities, on free loopback ports,
     * and waits until it logs "omnibus is ready". With on5671 every listener
     * is on a random 127.x.y.z address and AMQPS on its port 5671, where the
     * SDK dials with an ordinary connection string that names no port.
     */
    static Broker start(Run run, Entities entities, boolean on5671) throws Exception {
        for (int attempt = 0;; attempt++) {
            String host = on5671 ? randomLoopback() : "127.0.0.1";
            int amqps = on5671 ? 5671 : freePort(host);
            // HTTPS on 443 too where the process may bind it (as root, as CI
            // runs): where the SDK dials wss and the admin client HTTPS.
            int https = on5671 && canBind(host, 443) ? 443 : freePort(host);
            try {
                return start(run, entities, host, amqps, https);
            } catch (AddressInUse e) {
                if (attempt >= 20) {
                    throw new IllegalStateException("no 127.x.y.z address with port 5671 free", e);
                }
            }
        }
    }

    private static Broker start(Run run, Entities entities, String host, int amqpsPort, int https)
        throws Exception {
        Path dir = Files.createTempDirectory("omnibus-javatest-");
        Path config = dir.resolve("Config.json");
        Files.writeString(config, entities.toJson());
        int amqp = freePort(host), http = freePort(host);
        List<String> cmd = new ArrayList<>(List.of(run.binary.toString(), "--memory", "--data", dir.toString(),
            "--config", config.toString(), "--key-name", KEY_NAME, "--key", KEY,
            "--amqp-addr", host + ":" + amqp, "--http-addr", host + ":" + http,
            "--amqps-addr", host + ":" + amqpsPort, "--https-addr", host + ":" + https,
            "--tls-dir", run.tlsDir.toString(), "--tls-hosts", host,
            // Not the default :5301, which another broker may hold.
            "--metrics-addr", "127.0.0.1:0"));
        String level = System.getenv("OMNIBUS_JAVATEST_LOG_LEVEL");
        if (level != null && !level.isEmpty()) {
            cmd.addAll(List.of("--log-level", level));
        }
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true);
        // The harness's own settings name no flag of the broker, which
        // would warn about them.
        pb.environment().keySet().removeIf(k -> k.startsWith("OMNIBUS_JAVATEST"));
        Process p = pb.start();
        RUNNING.add(p);
        Broker b = new Broker(p, dir, host, amqp, amqpsPort, http, https, run.caPath);
        CompletableFuture<Void> ready = new CompletableFuture<>();
        boolean echo = "1".equals(System.getenv("OMNIBUS_JAVATEST_LOG"));
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null;) {
                    b.log(line);
                    if (echo) {
                        System.err.println("omnibus: " + line);
                    }
                    if (line.contains("omnibus is ready")) {
                        Matcher m = METRICS.matcher(line);
                        if (m.find()) {
                            b.metricsUrl = m.group(1);
                        }
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
            String log = b.tail(30);
            if (log.contains("address already in use")) {
                throw new AddressInUse(log);
            }
            throw new IllegalStateException("omnibus did not start: " + e + "\n" + log, e);
        }
        return b;
    }

    /** The emulator's connection string: plain AMQP on the broker's AMQP port. */
    public String connectionString() {
        return "Endpoint=sb://" + host + ":" + amqpPort + ";SharedAccessKeyName=" + KEY_NAME + ";SharedAccessKey="
            + KEY + ";UseDevelopmentEmulator=true";
    }

    /**
     * The ordinary connection string, as a cloud namespace has it, with the
     * port given (port &lt; 0: none, so the SDK picks 5671, or 443 for WebSockets).
     */
    public String tlsConnectionString(int port) {
        return "Endpoint=sb://" + host + (port < 0 ? "" : ":" + port) + "/;SharedAccessKeyName=" + KEY_NAME
            + ";SharedAccessKey=" + KEY;
    }

    /** A client builder on the emulator connection string with the tests' retry options. */
    public ServiceBusClientBuilder client() {
        return new ServiceBusClientBuilder().connectionString(connectionString()).retryOptions(RETRY);
    }

    /**
     * An administration client builder for the HTTPS port (the JVM trusts
     * the CA). The Java admin client keeps only the host of the endpoint
     * and always sends to https://host/ (port 443): on another port a
     * pipeline policy puts the port into each request's URL.
     */
    public ServiceBusAdministrationClientBuilder admin() {
        ServiceBusAdministrationClientBuilder b = new ServiceBusAdministrationClientBuilder()
            .connectionString(tlsConnectionString(-1))
            .retryOptions(new RetryOptions(new FixedDelayOptions(0, Duration.ofMillis(100))));
        if (httpsPort != 443) {
            b.addPolicy(new PortPolicy(httpsPort));
        }
        return b;
    }

    /** Sends every request to the same host on another port. */
    public record PortPolicy(int port) implements HttpPipelinePolicy {
        @Override
        public Mono<HttpResponse> process(HttpPipelineCallContext context, HttpPipelineNextPolicy next) {
            setPort(context);
            return next.process();
        }

        @Override
        public HttpResponse processSync(HttpPipelineCallContext context, HttpPipelineNextSyncPolicy next) {
            setPort(context);
            return next.processSync();
        }

        private void setPort(HttpPipelineCallContext context) {
            URL u = context.getHttpRequest().getUrl();
            try {
                context.getHttpRequest().setUrl(new URL(u.getProtocol(), u.getHost(), port, u.getFile()));
            } catch (MalformedURLException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /**
     * A metric's value from the broker's Prometheus endpoint: the sum of
     * the samples whose line starts with prefix (a name, or a name and
     * labels: {@code omnibus_active_connections{protocol="amqp"}}).
     */
    public double metric(String prefix) throws Exception {
        HttpRequest req = HttpRequest.newBuilder(URI.create(metricsUrl)).timeout(Duration.ofSeconds(5)).build();
        String body = HTTP.send(req, java.net.http.HttpResponse.BodyHandlers.ofString()).body();
        double sum = 0;
        boolean found = false;
        for (String line : body.split("\n")) {
            if (line.startsWith(prefix) && (line.charAt(prefix.length()) == ' '
                || line.charAt(prefix.length()) == '{' || prefix.endsWith("}"))) {
                sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                found = true;
            }
        }
        if (!found) {
            throw new IllegalStateException("no metric " + prefix + " at " + metricsUrl);
        }
        return sum;
    }

    /** The last lines the broker logged. */
    public synchronized String tail(int lines) {
        List<String> all = new ArrayList<>(tail);
        return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
    }

    /** Whether the process is still running. */
    public boolean isAlive() {
        return process.isAlive();
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

    private static boolean canBind(String host, int port) {
        try (ServerSocket s = new ServerSocket(port, 1, InetAddress.getByName(host))) {
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static String randomLoopback() {
        ThreadLocalRandom r = ThreadLocalRandom.current();
        return "127." + (1 + r.nextInt(250)) + "." + r.nextInt(256) + "." + (1 + r.nextInt(250));
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

    private static final class AddressInUse extends Exception {
        AddressInUse(String log) {
            super(log);
        }
    }
}
