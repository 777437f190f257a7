"""Scrapes rigd's metrics over their Unix socket (HTTP/1.1 GET /metrics) and parses them
with prometheus_client's own text parser, the one Prometheus' Python tooling uses.

Prints one JSON object: the Content-Type, and every sample as [name, labels, value].
client/rig-client/tests/metrics.rs checks the counts; this script fails only when the scrape or
the parse does (a parse error is the point: the exposition must be valid 0.0.4).
"""

import json
import socket
import sys

from prometheus_client.parser import text_string_to_metric_families


def scrape(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: rigd\r\nAccept: text/plain\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    if not lines[0].startswith("HTTP/1.1 200"):
        raise SystemExit(f"scrape failed: {lines[0]}")
    headers = dict(l.split(": ", 1) for l in lines[1:])
    if int(headers["Content-Length"]) != len(body):
        raise SystemExit("Content-Length does not match the body")
    return headers["Content-Type"], body.decode()


def main():
    ctype, text = scrape(sys.argv[1])
    samples = []
    families = 0
    for family in text_string_to_metric_families(text):
        families += 1
        for s in family.samples:
            samples.append([s.name, s.labels, s.value])
    print(json.dumps({"content_type": ctype, "families": families, "samples": samples}))


if __name__ == "__main__":
    main()
