import http.server, threading, urllib.request
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello over loopback"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
t = threading.Thread(target=srv.serve_forever, daemon=True)
t.start()
with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_address[1]}/x") as r:
    print(r.status, r.read().decode())
srv.shutdown()
