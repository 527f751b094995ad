"""The server the recorded Locust run loaded: 10 ms per response for 30 s, then 30 ms."""
import http.server
import time

T0 = time.time()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(0.010 if time.time() - T0 < 30 else 0.030)   # a step change half-way through a 60 s run
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", 8089), Handler).serve_forever()
