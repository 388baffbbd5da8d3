package omnibus;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy on loopback in front of a broker port that cuts its first
 * connections after the client has sent a given number of bytes (closing
 * both sides), and passes later ones through: a client torn down in the
 * middle of its handshake, then connecting again.
 */
final class CuttingProxy implements AutoCloseable {
    private final ServerSocket server;
    private final String host;
    private final int port;
    private final int[] cuts;
    private final AtomicInteger accepted = new AtomicInteger();
    private final List<Socket> sockets = new ArrayList<>();

    /** Proxies to host:port; connection i is cut after cuts[i] client bytes. */
    CuttingProxy(String host, int port, int... cuts) throws IOException {
        this.host = host;
        this.port = port;
        this.cuts = cuts;
        this.server = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
        Thread t = new Thread(this::acceptLoop, "cutting-proxy");
        t.setDaemon(true);
        t.start();
    }

    int port() {
        return server.getLocalPort();
    }

    /** How many connections were accepted. */
    int accepted() {
        return accepted.get();
    }

    private void acceptLoop() {
        try {
            for (;;) {
                Socket client = server.accept();
                int n = accepted.getAndIncrement();
                Socket upstream = new Socket();
                upstream.connect(new InetSocketAddress(host, port), 5000);
                synchronized (sockets) {
                    sockets.add(client);
                    sockets.add(upstream);
                }
                long cut = n < cuts.length ? cuts[n] : Long.MAX_VALUE;
                pump(client, upstream, cut);
                pump(upstream, client, Long.MAX_VALUE);
            }
        } catch (IOException e) {
            // closed
        }
    }

    /** Copies from → to; after limit bytes, closes both. */
    private static void pump(Socket from, Socket to, long limit) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[8192];
            long sent = 0;
            try (InputStream in = from.getInputStream()) {
                OutputStream out = to.getOutputStream();
                for (int r; (r = in.read(buf, 0, (int) Math.min(buf.length, Math.max(1, limit - sent)))) > 0;) {
                    out.write(buf, 0, r);
                    out.flush();
                    sent += r;
                    if (sent >= limit) {
                        break;
                    }
                }
            } catch (IOException ignored) {
                // either side went away
            }
            closeQuietly(from);
            closeQuietly(to);
        }, "cutting-proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // already closed
        }
    }

    @Override
    public void close() throws IOException {
        server.close();
        synchronized (sockets) {
            sockets.forEach(CuttingProxy::closeQuietly);
        }
    }
}
