//! The playbook (data): failure-mode tags to root-cause hypotheses and actions, most specific
//! entries first.

use crate::domain::{ActionKind, Confidence};

/// One playbook entry: when all of `when` are present and none of `unless`, propose the
/// hypothesis and the actions.
pub struct Play {
    /// Tags that must all be present.
    pub when: &'static [&'static str],
    /// Tags that must be absent.
    pub unless: &'static [&'static str],
    /// The hypothesis.
    pub hypothesis: &'static str,
    /// Confidence before ceilings.
    pub confidence: Confidence,
    /// Actions with their rationale.
    pub actions: &'static [(ActionKind, &'static str)],
}

use ActionKind as A;
use Confidence as C;

/// The playbook, most specific entries first.
pub const PLAYBOOK: &[Play] = &[
    Play {
        when: &["connection_pool_exhausted", "connection_leak"],
        unless: &[],
        confidence: C::High,
        hypothesis: "Connection leak: connections are not returned to the pool, so it fills up while the request rate stays flat",
        actions: &[
            (
                A::RollbackDeploy,
                "A leak usually arrives with a code change: roll back the last deploy",
            ),
            (
                A::RestartService,
                "Restarting returns leaked connections: a stopgap that buys time, not a fix",
            ),
            (
                A::RaisePoolLimit,
                "Raising the pool size postpones exhaustion while connections keep leaking",
            ),
        ],
    },
    Play {
        when: &["connection_pool_exhausted", "traffic_surge"],
        unless: &["connection_leak"],
        confidence: C::High,
        hypothesis: "Load-driven pool exhaustion: the pool is too small for the current request rate",
        actions: &[
            (
                A::RaisePoolLimit,
                "Pool wait climbs with the request rate: more connections absorb the load",
            ),
            (A::ScaleOut, "Spread the load over more instances"),
        ],
    },
    Play {
        when: &["connection_leak"],
        unless: &["connection_pool_exhausted"],
        confidence: C::High,
        hypothesis: "Connection leak: pool usage climbs while the request rate stays flat",
        actions: &[
            (
                A::RollbackDeploy,
                "A leak usually arrives with a code change: roll back the last deploy",
            ),
            (
                A::RestartService,
                "Restarting returns leaked connections: a stopgap",
            ),
            (
                A::RaisePoolLimit,
                "Raising the pool size postpones exhaustion while connections keep leaking",
            ),
        ],
    },
    Play {
        when: &["connection_pool_exhausted"],
        unless: &["connection_leak", "traffic_surge"],
        confidence: C::Medium,
        hypothesis: "Connection pool exhausted: callers wait for database connections (pool too small, a leak, or slow queries holding connections)",
        actions: &[
            (
                A::RaisePoolLimit,
                "More connections relieve waiting callers if the database has headroom",
            ),
            (
                A::RestartService,
                "Restarting frees held connections while the cause is found",
            ),
            (
                A::GatherMoreEvidence,
                "Compare pool wait with the request rate: flat rate means a leak, climbing rate means load",
            ),
        ],
    },
    Play {
        when: &["too_many_connections"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "The database refuses connections: clients together open more than its max_connections",
        actions: &[
            (
                A::LowerPoolLimit,
                "Smaller per-instance pools keep the total under the database limit",
            ),
            (A::ScaleIn, "Fewer instances open fewer connections"),
        ],
    },
    Play {
        when: &["slow_query"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Slow queries hold connections and threads (missing index or a bad plan)",
        actions: &[
            (
                A::RollbackDeploy,
                "A new query or migration often brings the slow plan",
            ),
            (
                A::GatherMoreEvidence,
                "Find the slow statement and its plan",
            ),
        ],
    },
    Play {
        when: &["oom_killed"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "The kernel stops processes that go over their memory limit (a leak, or a limit set too low)",
        actions: &[
            (
                A::RollbackDeploy,
                "A memory regression usually ships with a release",
            ),
            (A::ScaleOut, "Spread memory-heavy work"),
            (A::RestartService, "Restarts reset memory: a stopgap"),
        ],
    },
    Play {
        when: &["memory_pressure"],
        unless: &["oom_killed"],
        confidence: C::Low,
        hypothesis: "Memory pressure is building (a leak or an undersized limit)",
        actions: &[
            (A::RestartService, "Restarts reset memory: a stopgap"),
            (
                A::GatherMoreEvidence,
                "Take a heap profile before restarting",
            ),
        ],
    },
    Play {
        when: &["gc_pressure"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Garbage-collection pauses stall requests (heap too small or allocation spike)",
        actions: &[
            (A::ScaleOut, "Less load per instance means less allocation"),
            (A::RestartService, "Resets the heap: a stopgap"),
        ],
    },
    Play {
        when: &["disk_full"],
        unless: &[],
        confidence: C::High,
        hypothesis: "A disk or volume is full, so writes fail",
        actions: &[(
            A::FreeDiskSpace,
            "Free space (rotate or delete logs, old data) so writes succeed",
        )],
    },
    Play {
        when: &["file_descriptors_exhausted"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "The process ran out of file descriptors (a socket or file leak, or a low ulimit)",
        actions: &[
            (
                A::RestartService,
                "Restarting closes leaked descriptors: a stopgap",
            ),
            (
                A::RollbackDeploy,
                "A descriptor leak usually ships with a change",
            ),
        ],
    },
    Play {
        when: &["tls_certificate_expired"],
        unless: &[],
        confidence: C::High,
        hypothesis: "An expired TLS certificate breaks handshakes",
        actions: &[(A::RotateCredentials, "Renew and deploy the certificate")],
    },
    Play {
        when: &["certificate_verify_failed"],
        unless: &["tls_certificate_expired"],
        confidence: C::Medium,
        hypothesis: "Certificate verification fails (wrong chain or CA bundle)",
        actions: &[
            (A::RotateCredentials, "Deploy the right chain / CA bundle"),
            (
                A::RollbackDeploy,
                "A config or image change may have dropped the CA bundle",
            ),
        ],
    },
    Play {
        when: &["dns_resolution_failure"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Name resolution fails, so dependencies are unreachable",
        actions: &[
            (
                A::RollbackDeploy,
                "DNS failures often follow a resolver or config change",
            ),
            (A::PageOwnerTeam, "Page the DNS / platform owners"),
        ],
    },
    Play {
        when: &["deadlock"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Transactions deadlock on conflicting lock order",
        actions: &[
            (
                A::RollbackDeploy,
                "A new code path likely changed the lock order",
            ),
            (A::RollForwardFix, "Fix the lock order and ship it"),
        ],
    },
    Play {
        when: &["lock_wait_timeout"],
        unless: &["deadlock"],
        confidence: C::Low,
        hypothesis: "Long transactions hold locks others wait for",
        actions: &[(A::GatherMoreEvidence, "Find the blocking transaction")],
    },
    Play {
        when: &["replication_lag"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "A database replica lags behind the primary, so reads are stale",
        actions: &[
            (
                A::ThrottleClients,
                "Slow the write load (bulk jobs) so the replica catches up",
            ),
            (
                A::GatherMoreEvidence,
                "Check replica I/O and long-running queries",
            ),
        ],
    },
    Play {
        when: &["rate_limited"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Requests are rate-limited (a quota reached or a limiter misconfigured)",
        actions: &[
            (A::ThrottleClients, "Back off the noisy client"),
            (A::RollbackDeploy, "A limiter config change may be wrong"),
        ],
    },
    Play {
        when: &["upstream_5xx"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "An upstream dependency returns 5xx errors",
        actions: &[
            (
                A::PageOwnerTeam,
                "Page the team owning the failing upstream",
            ),
            (A::GatherMoreEvidence, "Find which upstream fails first"),
        ],
    },
    Play {
        when: &["timeout"],
        unless: &["connection_pool_exhausted", "connection_leak"],
        confidence: C::Low,
        hypothesis: "Calls time out: a slow dependency or saturated resources",
        actions: &[
            (
                A::IncreaseTimeout,
                "Longer timeouts let slow calls finish (can hide the cause)",
            ),
            (A::GatherMoreEvidence, "Find which dependency got slow"),
        ],
    },
    Play {
        when: &["crash_loop_backoff"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Pods crash on start and back off (bad image or config)",
        actions: &[(
            A::RollbackDeploy,
            "Crash loops after a rollout point at the new image or config",
        )],
    },
    Play {
        when: &["process_crash"],
        unless: &["crash_loop_backoff"],
        confidence: C::Low,
        hypothesis: "The process crashes (panic or segfault)",
        actions: &[
            (A::RollbackDeploy, "Crashes usually ship with a change"),
            (
                A::RestartService,
                "Bring instances back while the cause is found",
            ),
        ],
    },
    Play {
        when: &["consumer_lag"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Consumers fall behind the queue (too few consumers or slow processing)",
        actions: &[(A::ScaleOut, "More consumers drain the backlog")],
    },
    Play {
        when: &["thread_pool_exhausted"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "The worker / thread pool is exhausted by slow requests",
        actions: &[
            (A::ScaleOut, "More workers"),
            (A::GatherMoreEvidence, "Find what holds the workers"),
        ],
    },
    Play {
        when: &["cache_failure"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "The cache fails or is cold, pushing load onto the backing store",
        actions: &[
            (A::FlushCache, "Clear poisoned entries"),
            (A::ThrottleClients, "Shed load while the cache warms"),
        ],
    },
    Play {
        when: &["network_partition"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "A network partition splits nodes",
        actions: &[
            (A::DrainNode, "Take the isolated node out of rotation"),
            (A::PageOwnerTeam, "Page the network owners"),
        ],
    },
    Play {
        when: &["authentication_failure"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "Authentication fails (expired or rotated credentials, or an attack)",
        actions: &[
            (A::RotateCredentials, "Re-issue the credentials"),
            (A::BlockTrafficSource, "Block an abusive source"),
        ],
    },
    Play {
        when: &["brute_force_attempt"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "A brute-force login attempt hammers the service",
        actions: &[(A::BlockTrafficSource, "Block the attacking addresses")],
    },
    Play {
        when: &["cpu_saturation"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "CPU is saturated",
        actions: &[(A::ScaleOut, "Add capacity")],
    },
    Play {
        when: &["config_change"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "A configuration or feature-flag change triggered the failure",
        actions: &[
            (A::DisableFeatureFlag, "Turn off the newly enabled flag"),
            (A::RollbackDeploy, "Revert the configuration change"),
        ],
    },
    Play {
        when: &["deploy_change"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "The last deploy introduced the failure",
        actions: &[(
            A::RollbackDeploy,
            "The failure started with a deploy: roll it back",
        )],
    },
];
