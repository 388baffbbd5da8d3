package omnibus.jms;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * What every broker of one test run shares, made once per run (kept in
 * JUnit's root store): the omnibus binary, built with
 * {@code go build ./cmd/omnibus} into target/, and a local CA in a
 * temporary directory that every broker's AMQPS listener uses, made with
 * {@code omnibus cert} (the AMQPS test trusts it through Qpid JMS's
 * transport.trustStoreLocation, as a user would).
 */
final class Run implements AutoCloseable {
    private static final long BUILD_TIMEOUT_SECONDS = 240;

    final Path binary;
    final Path tlsDir;
    final Path caPath;

    private Run(Path binary, Path tlsDir) {
        this.binary = binary;
        this.tlsDir = tlsDir;
        this.caPath = tlsDir.resolve("omnibus-ca.pem");
    }

    /** The run's shared state, made by the first test class that asks. */
    static Run get(ExtensionContext context) {
        return context.getRoot()
            .getStore(ExtensionContext.Namespace.create(Run.class))
            .getOrComputeIfAbsent(Run.class, k -> {
                try {
                    return make();
                } catch (Exception e) {
                    throw new IllegalStateException("setting up the omnibus test run: " + e.getMessage(), e);
                }
            }, Run.class);
    }

    private static Run make() throws Exception {
        Path root = Paths.get(System.getProperty("omnibus.root", "../..")).toAbsolutePath().normalize();
        Path buildDir = Paths.get(System.getProperty("omnibus.buildDir", "target")).toAbsolutePath();
        Files.createDirectories(buildDir);
        Path bin = buildDir.resolve("omnibus");
        exec(root, List.of(goCommand(), "build", "-o", bin.toString(), "./cmd/omnibus"), BUILD_TIMEOUT_SECONDS);
        Run run = new Run(bin, Files.createTempDirectory("omnibus-jmstest-tls-"));
        exec(root, List.of(bin.toString(), "cert", "--memory", "--tls-dir", run.tlsDir.toString()), 60);
        return run;
    }

    /** go on PATH, else where Go's tarball puts it (as the Makefile does). */
    private static String goCommand() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Paths.get(dir, "go"))) {
                return Paths.get(dir, "go").toString();
            }
        }
        return "/usr/local/go/bin/go";
    }

    private static void exec(Path dir, List<String> cmd, long timeoutSeconds) throws Exception {
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        byte[] out;
        try (InputStream in = p.getInputStream()) {
            out = in.readAllBytes();
        }
        if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IllegalStateException(String.join(" ", cmd) + ": timed out");
        }
        if (p.exitValue() != 0) {
            throw new IllegalStateException(String.join(" ", cmd) + " failed:\n" + new String(out, StandardCharsets.UTF_8));
        }
    }

    @Override
    public void close() {
        Broker.deleteTree(tlsDir);
    }
}
