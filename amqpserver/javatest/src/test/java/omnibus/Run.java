package omnibus;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * What every broker of one test run shares, made once per run (kept in
 * JUnit's root store, closed when the run ends): the omnibus binary, built
 * with {@code go build ./cmd/omnibus} into target/, and a local CA in a
 * temporary directory that every broker's TLS listeners use, made with
 * {@code omnibus cert} before any broker starts. The JVM trusts that CA:
 * a PKCS12 trust store holding it is set as javax.net.ssl.trustStore
 * before any TLS connection, so proton-j (AMQPS, wss) and Netty (the
 * administration client over HTTPS) verify omnibus's certificate as
 * they would Service Bus's.
 */
final class Run implements AutoCloseable {
    private static final long BUILD_TIMEOUT_SECONDS = 240;

    final Path binary;
    final Path tlsDir;
    final Path caPath;
    final Path trustStore;

    private Run(Path binary, Path tlsDir) throws Exception {
        this.binary = binary;
        this.tlsDir = tlsDir;
        this.caPath = tlsDir.resolve("omnibus-ca.pem");
        this.trustStore = tlsDir.resolve("truststore.p12");
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

        Run run = new Run(bin, Files.createTempDirectory("omnibus-javatest-tls-"));
        exec(root, List.of(bin.toString(), "cert", "--memory", "--tls-dir", run.tlsDir.toString()), 60);
        KeyStore ks = KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        try (InputStream in = Files.newInputStream(run.caPath)) {
            Certificate ca = CertificateFactory.getInstance("X.509").generateCertificate(in);
            ks.setCertificateEntry("omnibus", ca);
        }
        try (var out = Files.newOutputStream(run.trustStore)) {
            ks.store(out, "changeit".toCharArray());
        }
        System.setProperty("javax.net.ssl.trustStore", run.trustStore.toString());
        System.setProperty("javax.net.ssl.trustStorePassword", "changeit");
        System.setProperty("javax.net.ssl.trustStoreType", "PKCS12");
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
            throw new IllegalStateException(String.join(" ", cmd) + " failed:\n"
                + new String(out, StandardCharsets.UTF_8));
        }
    }

    @Override
    public void close() {
        Broker.deleteTree(tlsDir);
    }
}
