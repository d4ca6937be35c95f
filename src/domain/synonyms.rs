//! The domain synonym table used by recall: each failure-mode concept with the phrases people use
//! for it ("pool ≈ connection pool ≈ too many connections"). Data, not code branches: matching a
//! phrase in a query adds the concept's tag (a structured key) and the other phrases' words (FTS
//! expansion).

/// `(failure-mode tag, phrases)`. Phrases are lower-case; a phrase matches on word boundaries.
pub const SYNONYMS: &[(&str, &[&str])] = &[
    (
        "connection_pool_exhausted",
        &[
            "connection pool",
            "pool exhausted",
            "pool exhaustion",
            "waiting for database connections",
            "waiting for connections",
            "waiting for a connection",
            "database connections",
            "db connections",
            "database connection",
            "db connection",
            "connection from the pool",
            "database handle",
            "waiting on the db",
            "connection timeout",
            "acquire connection",
            "hikari",
            "pool wait",
            "pool saturation",
            "pool starved",
            "no free connections",
            "no available connections",
        ],
    ),
    (
        "too_many_connections",
        &[
            "too many connections",
            "max connections",
            "max_connections",
            "connection limit",
            "connection slots",
        ],
    ),
    (
        "connection_leak",
        &[
            "connection leak",
            "leaked connections",
            "leaking connections",
            "connections not returned",
            "not released",
            "idle in transaction",
            "stuck sessions",
            "leak",
        ],
    ),
    (
        "oom_killed",
        &[
            "oom",
            "out of memory",
            "oomkilled",
            "oom killed",
            "oom-killed",
            "memory limit",
            "killed process",
            "heap exhausted",
        ],
    ),
    (
        "memory_pressure",
        &[
            "memory pressure",
            "memory leak",
            "heap growth",
            "rss growing",
            "swap",
        ],
    ),
    (
        "gc_pressure",
        &[
            "gc pause",
            "gc pauses",
            "garbage collection",
            "full gc",
            "stop the world",
            "gc overhead",
            "stop-the-world",
            "heap size",
            "larger heap",
            "bigger heap",
            "jvm heap",
            "java heap",
            "-xmx",
        ],
    ),
    (
        "disk_full",
        &[
            "disk full",
            "no space left",
            "out of disk",
            "disk space",
            "volume full",
            "filesystem full",
            "enospc",
        ],
    ),
    (
        "file_descriptors_exhausted",
        &[
            "too many open files",
            "file descriptors",
            "fd limit",
            "emfile",
            "ulimit",
        ],
    ),
    (
        "tls_certificate_expired",
        &[
            "certificate expired",
            "cert expired",
            "expired certificate",
            "tls handshake",
            "x509",
            "ssl certificate",
            "certificate has expired",
        ],
    ),
    (
        "certificate_verify_failed",
        &[
            "certificate verify failed",
            "unknown authority",
            "self signed certificate",
        ],
    ),
    (
        "dns_resolution_failure",
        &[
            "dns",
            "name resolution",
            "nxdomain",
            "could not resolve",
            "servfail",
            "resolver",
            "no such host",
        ],
    ),
    (
        "deadlock",
        &[
            "deadlock",
            "deadlocked",
            "lock wait",
            "lock contention",
            "blocked transactions",
        ],
    ),
    ("lock_wait_timeout", &["lock wait timeout", "lock timeout"]),
    (
        "replication_lag",
        &[
            "replication lag",
            "replica lag",
            "replica behind",
            "stale reads",
            "seconds behind master",
            "replica delay",
        ],
    ),
    (
        "rate_limited",
        &[
            "rate limited",
            "rate limit",
            "429",
            "too many requests",
            "throttled",
            "throttling",
            "quota exceeded",
        ],
    ),
    (
        "upstream_5xx",
        &[
            "502",
            "503",
            "504",
            "bad gateway",
            "service unavailable",
            "gateway timeout",
            "upstream errors",
            "5xx",
        ],
    ),
    (
        "timeout",
        &[
            "timeout",
            "timed out",
            "timing out",
            "deadline exceeded",
            "slow responses",
            "latency",
        ],
    ),
    (
        "crash_loop_backoff",
        &[
            "crashloopbackoff",
            "crash loop",
            "crashlooping",
            "restarting pods",
            "back-off restarting",
        ],
    ),
    (
        "process_crash",
        &["segfault", "panic", "core dumped", "crashed", "fatal error"],
    ),
    (
        "consumer_lag",
        &[
            "consumer lag",
            "queue backlog",
            "queue depth",
            "backlog",
            "kafka lag",
            "messages piling up",
            "queue lag",
        ],
    ),
    (
        "deploy_change",
        &[
            "deploy",
            "deployment",
            "release",
            "rollout",
            "new version",
            "shipped",
        ],
    ),
    (
        "config_change",
        &[
            "config change",
            "configuration change",
            "feature flag",
            "flag flip",
            "config push",
            "misconfiguration",
        ],
    ),
    (
        "traffic_surge",
        &[
            "traffic surge",
            "traffic spike",
            "load spike",
            "flash sale",
            "more traffic",
            "request rate climbing",
            "peak traffic",
            "surge",
        ],
    ),
    (
        "slow_query",
        &[
            "slow query",
            "slow queries",
            "full table scan",
            "missing index",
            "query plan",
        ],
    ),
    (
        "thread_pool_exhausted",
        &[
            "thread pool",
            "worker pool",
            "threads exhausted",
            "no idle workers",
            "maxclients",
        ],
    ),
    (
        "network_partition",
        &[
            "network partition",
            "split brain",
            "packet loss",
            "unreachable",
        ],
    ),
    (
        "cache_failure",
        &[
            "cache miss",
            "cache stampede",
            "thundering herd",
            "cache eviction",
            "redis down",
            "cache cold",
        ],
    ),
    (
        "authentication_failure",
        &[
            "authentication failure",
            "auth failure",
            "invalid credentials",
            "401",
            "login failures",
        ],
    ),
    (
        "leader_election",
        &["leader election", "lost leadership", "quorum", "election"],
    ),
    (
        "cpu_saturation",
        &["cpu saturation", "high cpu", "cpu throttling", "cpu 100"],
    ),
    (
        "health_check_failed",
        &[
            "health check",
            "readiness probe",
            "liveness probe",
            "unhealthy",
        ],
    ),
    (
        "circuit_breaker_open",
        &[
            "circuit breaker",
            "breaker open",
            "half-open",
            "half open",
            "short-circuited",
            "fail fast",
            "fail immediately",
        ],
    ),
    (
        "permission_denied",
        &[
            "forbidden",
            "403",
            "access denied",
            "permission denied",
            "not authorized",
            "bucket policy",
            "access policy",
        ],
    ),
    (
        "credential_expired",
        &[
            "key expired",
            "expired key",
            "access key",
            "invalidaccesskeyid",
            "static key",
            "credential lifetime",
            "key rotation",
            "token expired",
            "expired token",
            "static credentials",
        ],
    ),
    (
        "certificate_chain_incomplete",
        &[
            "intermediate certificate",
            "intermediate ca",
            "certificate chain",
            "full chain",
            "fullchain",
            "certification path",
            "pkix path",
            "trust anchor",
            "unknown ca",
            "unable to verify the first certificate",
        ],
    ),
    (
        "clock_skew",
        &[
            "clock skew",
            "clock drift",
            "ntp",
            "chrony",
            "not yet valid",
            "issued in the future",
            "time drift",
            "system clock",
        ],
    ),
    (
        "consumer_rebalance",
        &[
            "rebalance",
            "rebalancing",
            "left group",
            "leavegroup",
            "out of the group",
            "max.poll.interval.ms",
            "poll interval",
            "poll timeout",
            "group generation",
            "generation id",
        ],
    ),
    (
        "poison_message",
        &[
            "poison message",
            "poison pill",
            "deserialize",
            "deserializing",
            "deserialization",
            "serializationexception",
            "unknown enum",
            "offset stuck",
            "dead letter",
        ],
    ),
    (
        "cache_eviction",
        &[
            "maxmemory",
            "evicted_keys",
            "evicted keys",
            "key eviction",
            "no expiry",
            "no ttl",
            "ttl -1",
        ],
    ),
    (
        "cache_stampede",
        &[
            "thundering herd",
            "cache stampede",
            "flushall",
            "cache flush",
            "flushed the cache",
            "cold cache",
            "request coalescing",
        ],
    ),
    (
        "shard_unassigned",
        &[
            "unassigned",
            "shard allocation",
            "unassigned shards",
            "cluster is red",
            "cluster red",
            "allocation awareness",
            "replica shards",
        ],
    ),
    (
        "pod_eviction",
        &[
            "eviction manager",
            "evicting pod",
            "evicted pods",
            "low on resource",
            "memorypressure",
            "node memory pressure",
        ],
    ),
    (
        "proxy_timeout",
        &[
            "proxy read timeout",
            "proxy-read-timeout",
            "read timeout",
            "upstream_response_time",
            "gateway timeout",
        ],
    ),
    (
        "cloud_quota_exceeded",
        &[
            "quota_exceeded",
            "quota exceeded",
            "vcpu quota",
            "cpus quota",
            "regional quota",
            "failed to create instance",
            "insufficient capacity",
        ],
    ),
    (
        "slow_scale_up",
        &[
            "stabilisation window",
            "stabilization window",
            "image pull",
            "pulling image",
        ],
    ),
    (
        "duplicate_execution",
        &[
            "ran twice",
            "billed twice",
            "charged twice",
            "two copies",
            "double charge",
        ],
    ),
    (
        "missing_index",
        &[
            "missing index",
            "seq scan",
            "sequential scan",
            "full table scan",
            "index missing",
            "table rebuild",
            "copy and swap",
            "shadow table",
        ],
    ),
    (
        "stale_statistics",
        &[
            "stale statistics",
            "table statistics",
            "nested loop",
            "row estimate",
            "backfill",
            "bulk load",
            "autovacuum",
            "millions of rows",
            "bulk insert",
            "bulk import",
            "mass delete",
        ],
    ),
    (
        "core_dumps",
        &[
            "core dump",
            "core dumps",
            "core dumped",
            "/var/crash",
            "code=dumped",
            "segfault",
            "core file",
        ],
    ),
    (
        "log_spooling",
        &[
            "log shipper",
            "spool",
            "spooling",
            "spooled",
            "buffer directory",
            "ingest throttled",
            "log buffer",
            "backpressure",
        ],
    ),
    (
        "stale_dns",
        &[
            "dns ttl",
            "dns cache",
            "networkaddress.cache.ttl",
            "cached address",
        ],
    ),
    (
        "ipv6_routing",
        &[
            "ipv6",
            "aaaa",
            "dual-stack",
            "dual stack",
            "v6 prefix",
            "prefix announced",
            "not announced",
            "black-holed",
            "bgp",
        ],
    ),
    (
        "cpu_steal",
        &[
            "cpu steal",
            "steal time",
            "noisy neighbour",
            "noisy neighbor",
            "hypervisor",
            "shared tenancy",
            "shared host",
        ],
    ),
    (
        "feature_flag_change",
        &[
            "feature flag",
            "flag rollout",
            "flag ramp",
            "experiment cohort",
            "flag variant",
        ],
    ),
];

/// Tags whose phrases occur in `text` (lower-cased inside), each with the phrase that matched.
pub fn concepts_in(text: &str) -> Vec<(&'static str, &'static str)> {
    let lower = text.to_lowercase();
    let mut out = Vec::new();
    for (tag, phrases) in SYNONYMS {
        if let Some(p) = phrases.iter().find(|p| contains_phrase(&lower, p)) {
            out.push((*tag, *p));
        }
    }
    out
}

/// The phrases of a tag (empty for unknown tags).
pub fn phrases_of(tag: &str) -> &'static [&'static str] {
    SYNONYMS
        .iter()
        .find(|(t, _)| *t == tag)
        .map(|(_, p)| *p)
        .unwrap_or(&[])
}

/// Whether `phrase` occurs in `haystack` (both lower-case) on word boundaries.
pub fn contains_phrase(haystack: &str, phrase: &str) -> bool {
    let bytes = haystack.as_bytes();
    let mut start = 0;
    while let Some(pos) = haystack[start..].find(phrase) {
        let i = start + pos;
        let j = i + phrase.len();
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let after_ok = j >= bytes.len() || !bytes[j].is_ascii_alphanumeric();
        if before_ok && after_ok {
            return true;
        }
        start = i + 1;
        while !haystack.is_char_boundary(start) {
            start += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paraphrases_map_to_the_same_concept() {
        let a = concepts_in("checkout API timing out waiting for database connections");
        assert!(
            a.iter().any(|(t, _)| *t == "connection_pool_exhausted"),
            "{a:?}"
        );
        let b = concepts_in("Pods OOMKilled after the release");
        assert!(b.iter().any(|(t, _)| *t == "oom_killed"));
        assert!(b.iter().any(|(t, _)| *t == "deploy_change"));
        assert!(
            concepts_in("leakage")
                .iter()
                .all(|(t, _)| *t != "connection_leak"),
            "word boundaries"
        );
    }
}
