"""Serves web-demo/ (and a model folder under /models/) on loopback for the browser test and
exits with the JSON the test page POSTs to /result (written to the output path, with "gets":
how many times each path was fetched), or 2 after a timeout."""
import collections, http.server, json, os, sys, threading, functools

root, port, timeout, out_path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
result = {}
done = threading.Event()
gets = collections.Counter()

class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, '.wasm': 'application/wasm', '.js': 'text/javascript'}

    def do_GET(self):
        gets[self.path.split('?')[0]] += 1
        super().do_GET()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('content-length', 0)))
        self.send_response(204)
        self.end_headers()
        if self.path == '/result':
            try:
                page = json.loads(body)
                if isinstance(page, dict):
                    body = json.dumps({**page, "gets": dict(gets)}).encode()
            except ValueError:
                pass
            with open(out_path, 'wb') as f:
                f.write(body)
            done.set()

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(('127.0.0.1', port), functools.partial(Handler, directory=root))
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"serving {root} on http://127.0.0.1:{port}/", file=sys.stderr, flush=True)
ok = done.wait(timeout)
server.shutdown()
sys.exit(0 if ok else 2)
