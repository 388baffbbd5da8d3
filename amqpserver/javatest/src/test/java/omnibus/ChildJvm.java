package omnibus;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A second JVM running one of the programs in omnibus.child with the
 * tests' classpath: the SDK in a process the test can kill. Its output
 * lines are read as they come; {@link #close()} kills it if it still runs.
 */
final class ChildJvm implements AutoCloseable {
    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> all = new ArrayList<>();

    private ChildJvm(Process process) {
        this.process = process;
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null;) {
                    synchronized (all) {
                        all.add(line);
                    }
                    lines.add(line);
                }
            } catch (IOException ignored) {
                // the process is gone
            }
        }, "child-jvm-" + process.pid());
        t.setDaemon(true);
        t.start();
    }

    /** Starts main (a class with a main method) with args, trusting omnibus's CA. */
    static ChildJvm start(Class<?> main, String... args) throws IOException {
        return start(true, main, args);
    }

    /** Starts main with args; with trust false, the JVM keeps the JDK's own CAs only. */
    static ChildJvm start(boolean trust, Class<?> main, String... args) throws IOException {
        // Surefire starts its JVM from a manifest-only jar; it keeps the
        // test classpath itself in surefire.test.class.path.
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(List.of(
            Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", cp));
        if (trust) {
            cmd.addAll(List.of("-Djavax.net.ssl.trustStore=" + System.getProperty("javax.net.ssl.trustStore", ""),
                "-Djavax.net.ssl.trustStorePassword=changeit", "-Djavax.net.ssl.trustStoreType=PKCS12"));
        }
        cmd.add(main.getName());
        cmd.addAll(List.of(args));
        return new ChildJvm(new ProcessBuilder(cmd).redirectErrorStream(true).start());
    }

    /** Waits for a line starting with prefix; returns it, or fails with the output so far. */
    String await(String prefix, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        for (;;) {
            long left = deadline - System.nanoTime();
            String line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : null;
            if (line == null) {
                throw new AssertionError("no line starting with '" + prefix + "' from the child JVM in " + timeout
                    + " (alive: " + process.isAlive() + "):\n" + output());
            }
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    /** Waits for the process to exit; returns its exit code. */
    int waitFor(Duration timeout) throws InterruptedException {
        if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new AssertionError("the child JVM did not exit in " + timeout + ":\n" + output());
        }
        return process.exitValue();
    }

    /** Kills the process as SIGKILL does: no shutdown hook, no close frame. */
    void kill() throws InterruptedException {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }

    String output() {
        synchronized (all) {
            return String.join("\n", all);
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            kill();
        }
    }
}
