// The counting hello server (README.md) on the JDK's com.sun.net.httpserver.

import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

public final class Counter {
    private static final long MOD = 2147483647L;
    private static long count;
    private static long hash;

    private static synchronized String hit(long k) {
        count += 1;
        hash = (hash * 1000003L + k) % MOD;
        return "hello " + k + " #" + count + "\n";
    }

    private static synchronized String sum() {
        return "count " + count + " hash " + hash + "\n";
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 64);
        server.createContext("/", ex -> {
            String path = ex.getRequestURI().getPath();
            int status = 200;
            String body;
            if (path.matches("/r/[0-9]{1,6}")) {
                body = hit(Long.parseLong(path.substring(3)));
            } else if (path.equals("/sum")) {
                body = sum();
            } else if (path.equals("/quit")) {
                body = "bye\n";
            } else {
                status = 404;
                body = "not found\n";
            }
            byte[] data = body.getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "text/plain");
            ex.sendResponseHeaders(status, data.length);
            try (OutputStream os = ex.getResponseBody()) {
                os.write(data);
            }
            if (path.equals("/quit")) {
                System.exit(0);
            }
        });
        server.start();
        System.out.println("listening on " + port);
    }
}
