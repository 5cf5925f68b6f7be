"""Runs moto (a third-party AWS emulator) serving one request at a time.

moto_server's threaded server is not safe for concurrent DynamoDB
transactions: TransactWriteItems deep-copies tables while other requests
change them ("dictionary changed size during iteration": a 500), and two
concurrent multi-item transactions can both pass their conditions. Serving
requests one at a time keeps moto's own semantics and removes the races.

    python3 scripts/conformance/moto_serial.py 5055
"""
import sys

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

port = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
app = DomainDispatcherApplication(create_backend_app)
run_simple("127.0.0.1", port, app, threaded=False, use_reloader=False)
