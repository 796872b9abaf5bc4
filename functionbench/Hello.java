// hello_java: the paper's Java hello-world function, an HTTP server
// answering a constant on 127.0.0.1:PORT (args[0], else $PORT, else 8080),
// with the JDK's com.sun.net.httpserver. Compiled for Java 17 by
// scripts/functionbench-image.sh. `GET /quit` answers, then exits.

import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

public final class Hello {
    public static void main(String[] args) throws Exception {
        String p = args.length > 0 ? args[0] : System.getenv().getOrDefault("PORT", "8080");
        int port = Integer.parseInt(p);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 16);
        server.createContext("/", ex -> {
            long t0 = System.nanoTime();
            String path = ex.getRequestURI().getPath();
            boolean quit = path.equals("/quit");
            int status = quit || path.equals("/") ? 200 : 404;
            String body = quit ? "bye\n"
                    : String.format("hello in %.3f ms%n", (System.nanoTime() - t0) / 1e6);
            byte[] data = body.getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "text/plain");
            ex.sendResponseHeaders(status, data.length);
            try (OutputStream os = ex.getResponseBody()) {
                os.write(data);
            }
            if (quit) {
                server.stop(0);
                System.exit(0);
            }
        });
        server.start();
        System.out.println("listening on " + port);
    }
}
