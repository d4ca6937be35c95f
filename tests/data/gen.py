#!/usr/bin/env python3
"""Writes the hand-labelled evidence samples in this folder (ours, invented; no Loghub text).

Each sample is `<name>.log` plus `<name>.templates.csv` (LineId,EventId,EventTemplate): the
template of every line, labelled by hand when the event list below was written, with every
parameter shown as `<*>` (the style of the corrected Loghub ground truth). The headers are
layouts the extractor has no fast path for. Deterministic (fixed seed); run from anywhere:
`python3 tests/data/gen.py`.
"""
import csv
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
R = random.Random(15)


def ip():
    return f"10.{R.randint(0, 255)}.{R.randint(0, 255)}.{R.randint(1, 254)}"


def ip6():
    return "2001:db8:%x::%x" % (R.randint(1, 0xFFFF), R.randint(1, 0xFFFF))


def uuid():
    h = "%032x" % R.getrandbits(128)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def hexid(n=16):
    return "%0*x" % (n, R.getrandbits(4 * n))


USERS = ["alice", "bob", "carol", "dmitri", "erin", "farah", "gus", "hana", "ivan", "jo"]
SKUS = ["SKU-%d" % i for i in range(100, 140)]


def write(name, rows):
    with open(os.path.join(HERE, name + ".log"), "w") as f:
        for line, _, _ in rows:
            f.write(line + "\n")
    with open(os.path.join(HERE, name + ".templates.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["LineId", "EventId", "EventTemplate"])
        for i, (_, eid, tpl) in enumerate(rows, 1):
            w.writerow([i, eid, tpl])


def clock(t):
    return t // 3600 % 24, t // 60 % 60, t % 60


# ---------------------------------------------------------------- nginx error log
def nginx():
    events = [
        (30, "E1", "warn", lambda: (
            f"an upstream response is buffered to a temporary file /var/cache/nginx/proxy_temp/{R.randint(1,9)}/{R.randint(10,99)}/{R.randint(10**9,10**10)} while reading upstream, client: {ip()}, server: shop.example.com, request: \"GET /api/catalog/{R.randint(1,5000)} HTTP/1.1\", upstream: \"http://{ip()}:8080/api/catalog/{R.randint(1,5000)}\", host: \"shop.example.com\"",
            "an upstream response is buffered to a temporary file <*> while reading upstream, client: <*>, server: <*>, request: \"<*>\", upstream: \"<*>\", host: \"<*>\"")),
        (40, "E2", "error", lambda: (
            f"connect() failed (111: Connection refused) while connecting to upstream, client: {ip()}, server: shop.example.com, request: \"POST /api/cart/{R.randint(1,900)}/items HTTP/1.1\", upstream: \"http://{ip()}:8080/api/cart/{R.randint(1,900)}/items\", host: \"shop.example.com\"",
            "connect() failed (<*>: Connection refused) while connecting to upstream, client: <*>, server: <*>, request: \"<*>\", upstream: \"<*>\", host: \"<*>\"")),
        (35, "E3", "error", lambda: (
            f"upstream timed out (110: Connection timed out) while reading response header from upstream, client: {ip()}, server: shop.example.com, request: \"GET /api/orders/{uuid()} HTTP/1.1\", upstream: \"http://{ip()}:8080/api/orders/{uuid()}\", host: \"shop.example.com\"",
            "upstream timed out (<*>: Connection timed out) while reading response header from upstream, client: <*>, server: <*>, request: \"<*>\", upstream: \"<*>\", host: \"<*>\"")),
        (25, "E4", "error", lambda: (
            f"open() \"/usr/share/nginx/html/static/img/{hexid(8)}.png\" failed (2: No such file or directory), client: {ip()}, server: shop.example.com, request: \"GET /static/img/{hexid(8)}.png HTTP/1.1\", host: \"shop.example.com\"",
            "open() \"<*>\" failed (<*>: No such file or directory), client: <*>, server: <*>, request: \"<*>\", host: \"<*>\"")),
        (30, "E5", "warn", lambda: (
            f"limiting requests, excess: {R.randint(1,40)}.{R.randint(100,999)} by zone \"api_rate\", client: {ip()}, server: shop.example.com, request: \"GET /api/search?q={R.choice(USERS)} HTTP/1.1\", host: \"shop.example.com\"",
            "limiting requests, excess: <*> by zone \"<*>\", client: <*>, server: <*>, request: \"<*>\", host: \"<*>\"")),
        (25, "E6", "info", lambda: (
            f"client {ip()} closed keepalive connection",
            "client <*> closed keepalive connection")),
        (20, "E7", "info", lambda: (
            f"client closed connection while waiting for request, client: {ip()}, server: 0.0.0.0:443",
            "client closed connection while waiting for request, client: <*>, server: <*>")),
        (20, "E8", "error", lambda: (
            f"peer closed connection in SSL handshake while SSL handshaking, client: {ip()}, server: 0.0.0.0:443",
            "peer closed connection in SSL handshake while SSL handshaking, client: <*>, server: <*>")),
        (15, "E9", "crit", lambda: (
            f"SSL_write() failed (32: Broken pipe) while sending to client, client: [{ip6()}]:{R.randint(1024,65535)}, server: [::]:443",
            "SSL_write() failed (<*>: Broken pipe) while sending to client, client: <*>, server: <*>")),
        (20, "E10", "warn", lambda: (
            f"{R.randint(1,64)} worker_connections are not enough while connecting to upstream, client: {ip()}, server: shop.example.com",
            "<*> worker_connections are not enough while connecting to upstream, client: <*>, server: <*>")),
        (15, "E11", "alert", lambda: (
            f"zero size buf in output while sending response to client, client: {ip()}, server: shop.example.com",
            "zero size buf in output while sending response to client, client: <*>, server: <*>")),
        (12, "E12", "notice", lambda: (
            "signal process started", "signal process started")),
        (12, "E13", "notice", lambda: (
            f"using inherited sockets from \"{R.randint(5,9)};{R.randint(10,19)};\"",
            "using inherited sockets from \"<*>\"")),
        (15, "E14", "warn", lambda: (
            f"a client request body is buffered to a temporary file /var/cache/nginx/client_temp/{R.randint(10**9,10**10)}, client: {ip()}, server: shop.example.com",
            "a client request body is buffered to a temporary file <*>, client: <*>, server: <*>")),
        (20, "E15", "error", lambda: (
            f"no live upstreams while connecting to upstream, client: {ip()}, server: shop.example.com, request: \"GET /api/stock/{R.choice(SKUS)} HTTP/1.1\", upstream: \"http://catalog/api/stock/{R.choice(SKUS)}\", host: \"shop.example.com\"",
            "no live upstreams while connecting to upstream, client: <*>, server: <*>, request: \"<*>\", upstream: \"<*>\", host: \"<*>\"")),
    ]
    bag = [e for e in events for _ in range(e[0])]
    R.shuffle(bag)
    t = 10 * 3600
    rows = []
    for _, eid, lvl, f in bag:
        t += R.randint(0, 40)
        h, m, s = clock(t)
        pid = R.choice([2811, 2812, 2813, 2814])
        msg, tpl = f()
        cid = "" if eid in ("E12", "E13") else f"*{R.randint(1, 2_000_000)} "
        rows.append((f"2026/11/29 {h:02}:{m:02}:{s:02} [{lvl}] {pid}#{pid}: {cid}{msg}", eid, tpl))
    write("nginx_error", rows)


# ---------------------------------------------------------------- Spring Boot console log
def spring():
    threads = ["main", "nio-8080-exec-%d" % 1] + ["nio-8080-exec-%d" % i for i in range(2, 11)] + ["scheduling-1", "kafka-consumer-1"]
    events = [
        (50, "S1", "INFO", "c.e.shop.web.OrderController", lambda: (
            f"Order {R.randint(10**6, 10**7)} placed by user {R.choice(USERS)} with {R.randint(1,9)} items, total {R.randint(1,500)}.{R.randint(10,99)} EUR",
            "Order <*> placed by user <*> with <*> items, total <*> EUR")),
        (40, "S2", "INFO", "c.e.shop.web.OrderController", lambda: (
            f"GET /api/orders/{R.randint(10**6, 10**7)} completed in {R.randint(2,900)}ms status=200",
            "GET <*> completed in <*> status=<*>")),
        (30, "S3", "WARN", "com.zaxxer.hikari.pool.HikariPool", lambda: (
            f"HikariPool-1 - Connection is not available, request timed out after {R.randint(20,40)*1000}ms (total={R.randint(10,20)}, active={R.randint(10,20)}, idle=0, waiting={R.randint(1,60)})",
            "<*> - Connection is not available, request timed out after <*> (total=<*>, active=<*>, idle=<*>, waiting=<*>)")),
        (25, "S4", "ERROR", "o.h.engine.jdbc.spi.SqlExceptionHelper", lambda: (
            "SQL Error: 0, SQLState: 08003", "SQL Error: <*>, SQLState: <*>")),
        (25, "S5", "ERROR", "c.e.shop.payment.PaymentClient", lambda: (
            f"Payment call for order {R.randint(10**6, 10**7)} failed after {R.randint(1,5)} attempts: java.net.SocketTimeoutException: Read timed out",
            "Payment call for order <*> failed after <*> attempts: java.net.SocketTimeoutException: Read timed out")),
        (30, "S6", "INFO", "c.e.shop.inventory.StockListener", lambda: (
            f"Received stock update sku={R.choice(SKUS)} delta={R.randint(-20,20)} partition={R.randint(0,11)} offset={R.randint(10**5,10**6)}",
            "Received stock update sku=<*> delta=<*> partition=<*> offset=<*>")),
        (20, "S7", "DEBUG", "o.s.web.servlet.DispatcherServlet", lambda: (
            f"Completed initialization in {R.randint(1,30)} ms", "Completed initialization in <*> ms")),
        (25, "S8", "WARN", "c.e.shop.cache.RedisCache", lambda: (
            f"Cache miss ratio {R.randint(20,90)}% above threshold for region 'product-details' on {ip()}:6379",
            "Cache miss ratio <*> above threshold for region '<*>' on <*>")),
        (20, "S9", "INFO", "c.e.shop.jobs.CartCleanupJob", lambda: (
            f"Removed {R.randint(0,4000)} abandoned carts older than {R.randint(1,72)}h",
            "Removed <*> abandoned carts older than <*>")),
        (20, "S10", "ERROR", "o.a.c.c.C.[.[.[/].[dispatcherServlet]", lambda: (
            f"Servlet.service() for servlet [dispatcherServlet] threw exception [Request processing failed: java.lang.IllegalStateException: cart {uuid()} is locked] with root cause",
            "Servlet.service() for servlet [dispatcherServlet] threw exception [Request processing failed: java.lang.IllegalStateException: cart <*> is locked] with root cause")),
        (20, "S11", "INFO", "o.s.b.w.embedded.tomcat.TomcatWebServer", lambda: (
            f"Tomcat started on port {R.choice([8080, 8081])} (http) with context path '/'",
            "Tomcat started on port <*> (http) with context path '<*>'")),
        (20, "S12", "WARN", "o.a.k.clients.NetworkClient", lambda: (
            f"[Consumer clientId=consumer-stock-{R.randint(1,4)}, groupId=stock] Connection to node {R.randint(0,3)} (kafka-{R.randint(0,3)}.kafka.svc/{ip()}:9092) could not be established. Broker may not be available.",
            "[Consumer clientId=<*>, groupId=<*>] Connection to node <*> (<*>) could not be established. Broker may not be available.")),
        (20, "S13", "INFO", "c.e.shop.auth.TokenFilter", lambda: (
            f"Rejected token for subject {R.choice(USERS)}: expired at 2026-11-29T{R.randint(0,23):02}:{R.randint(0,59):02}:00Z",
            "Rejected token for subject <*>: expired at <*>")),
        (15, "S14", "ERROR", "c.e.shop.web.GlobalExceptionHandler", lambda: (
            f"Unhandled exception on POST /api/checkout/{R.randint(1,999)}: Could not commit JPA transaction",
            "Unhandled exception on POST <*>: Could not commit JPA transaction")),
    ]
    bag = [e for e in events for _ in range(e[0])]
    R.shuffle(bag)
    t = 8 * 3600
    rows = []
    for _, eid, lvl, logger, f in bag:
        t += R.randint(0, 20)
        h, m, s = clock(t)
        msg, tpl = f()
        th = R.choice(threads)
        rows.append((f"2026-11-29 {h:02}:{m:02}:{s:02}.{R.randint(0,999):03} {lvl:>5} 4242 --- [{th:>15}] {logger:<40} : {msg}", eid, tpl))
    write("spring_boot", rows)


# ---------------------------------------------------------------- Go service, zap console encoder
def zap():
    events = [
        (45, "Z1", "INFO", "server/http.go:212", lambda: (
            f"request served\t{{\"method\": \"GET\", \"path\": \"/v1/items/{R.randint(1,9999)}\", \"status\": 200, \"duration\": \"{R.randint(1,900)}.{R.randint(100,999)}ms\", \"request_id\": \"{uuid()}\"}}",
            "request served\t{\"method\": \"<*>\", \"path\": \"<*>\", \"status\": <*>, \"duration\": \"<*>\", \"request_id\": \"<*>\"}")),
        (35, "Z2", "WARN", "retry/backoff.go:58", lambda: (
            f"retrying call\t{{\"attempt\": {R.randint(1,5)}, \"backoff\": \"{R.randint(100,3200)}ms\", \"target\": \"{ip()}:{R.randint(1024,65535)}\"}}",
            "retrying call\t{\"attempt\": <*>, \"backoff\": \"<*>\", \"target\": \"<*>\"}")),
        (30, "Z3", "ERROR", "store/postgres.go:141", lambda: (
            f"query failed\t{{\"error\": \"dial tcp {ip()}:5432: connect: connection refused\", \"query\": \"select_items\", \"elapsed\": \"{R.randint(1,30)}.{R.randint(0,9)}s\"}}",
            "query failed\t{\"error\": \"<*>\", \"query\": \"<*>\", \"elapsed\": \"<*>\"}")),
        (30, "Z4", "INFO", "worker/pool.go:77", lambda: (
            f"job finished\t{{\"job_id\": {R.randint(10**5,10**6)}, \"queue\": \"emails\", \"took\": \"{R.randint(1,59)}s\"}}",
            "job finished\t{\"job_id\": <*>, \"queue\": \"<*>\", \"took\": \"<*>\"}")),
        (25, "Z5", "DEBUG", "cache/lru.go:33", lambda: (
            f"evicted entries\t{{\"count\": {R.randint(1,500)}, \"bytes\": {R.randint(10**3,10**7)}}}",
            "evicted entries\t{\"count\": <*>, \"bytes\": <*>}")),
        (25, "Z6", "ERROR", "grpc/client.go:96", lambda: (
            f"rpc error\t{{\"code\": \"Unavailable\", \"method\": \"/inventory.v1.Stock/Reserve\", \"peer\": \"[{ip6()}]:{R.randint(1024,65535)}\"}}",
            "rpc error\t{\"code\": \"<*>\", \"method\": \"<*>\", \"peer\": \"<*>\"}")),
        (20, "Z7", "INFO", "main.go:64", lambda: (
            f"config reloaded\t{{\"version\": \"v1.{R.randint(0,30)}.{R.randint(0,9)}\", \"checksum\": \"{hexid(12)}\"}}",
            "config reloaded\t{\"version\": \"<*>\", \"checksum\": \"<*>\"}")),
        (25, "Z8", "WARN", "server/http.go:230", lambda: (
            f"slow request\t{{\"path\": \"/v1/carts/{uuid()}\", \"duration\": \"{R.randint(1,9)}.{R.randint(100,999)}s\", \"threshold\": \"1s\"}}",
            "slow request\t{\"path\": \"<*>\", \"duration\": \"<*>\", \"threshold\": \"<*>\"}")),
        (20, "Z9", "INFO", "auth/session.go:119", lambda: (
            f"session created for {R.choice(USERS)} from {ip()}",
            "session created for <*> from <*>")),
        (20, "Z10", "ERROR", "queue/kafka.go:201", lambda: (
            f"publish failed: kafka: client has run out of available brokers to talk to (Is your cluster reachable?)\t{{\"topic\": \"orders\", \"partition\": {R.randint(0,11)}}}",
            "publish failed: kafka: client has run out of available brokers to talk to (Is your cluster reachable?)\t{\"topic\": \"<*>\", \"partition\": <*>}")),
        (20, "Z11", "INFO", "worker/pool.go:52", lambda: (
            f"scaling workers from {R.randint(1,16)} to {R.randint(1,16)}",
            "scaling workers from <*> to <*>")),
        (20, "Z12", "DPANIC", "store/migrate.go:40", lambda: (
            f"migration {R.randint(1,300):04}_add_index checksum mismatch",
            "migration <*> checksum mismatch")),
        (20, "Z13", "WARN", "health/probe.go:27", lambda: (
            f"dependency unhealthy\t{{\"name\": \"redis\", \"addr\": \"{ip()}:6379\", \"failures\": {R.randint(1,20)}}}",
            "dependency unhealthy\t{\"name\": \"<*>\", \"addr\": \"<*>\", \"failures\": <*>}")),
    ]
    bag = [e for e in events for _ in range(e[0])]
    R.shuffle(bag)
    t = 13 * 3600
    rows = []
    for _, eid, lvl, caller, f in bag:
        t += R.randint(0, 15)
        h, m, s = clock(t)
        msg, tpl = f()
        rows.append((f"2026-11-29T{h:02}:{m:02}:{s:02}.{R.randint(0,999):03}Z\t{lvl}\t{caller}\t{msg}", eid, tpl.replace("\t", " ")))
    write("go_zap", rows)


nginx()
spring()
zap()
