//! Consolidation similarity threshold (issue #21): measures, with the built-in embedding model
//! (all-MiniLM-L6-v2), how far apart the cosines of "same rule, other words" pairs and
//! "different rule, same service and failure mode / action" pairs are, and which threshold
//! separates them best, to set `domain::consolidation::SIMILARITY_THRESHOLD` from data.
//!
//! The labelled set is written here: triples of an anchor, a paraphrase of it (same rule) and a
//! different rule of the same topic (connection pools, DNS, certificates, rollbacks, disk full,
//! queue lag, caches, rate limits, feature flags, memory leaks, replicas, drains, …). Texts are
//! embedded as consolidation compares them: a lesson by its ALWAYS line alone, a remediation
//! failure by its whole record text (`{action} on {target} during {incident} ({title}) did not
//! resolve it: {note}`, as a verdict writes it), through [`Embedder::embed`].
//!
//! Prints per class the min / p10 / median / p90 / max cosine, then for thresholds 0.55 to 0.90
//! (step 0.05) the precision and recall of "cosine ≥ t ⇒ same rule", and the chosen threshold:
//! the highest F1, and among thresholds within 0.02 of it the one with the highest precision (a
//! false merge costs a reviewer a rejection; a missed one only leaves two records standing).
//!
//! Usage: `cargo run --release --example consolidation-threshold`.

use incidentmind::memory::embeddings::{BuiltinEmbedder, Embedder};
use incidentmind::memory::minilm;

/// Lesson triples, ALWAYS lines: (anchor, same rule in other words, different rule of the same
/// topic and action).
const LESSONS: &[(&str, &str, &str)] = &[
    (
        "Look for leaked connections in the application before raising the database pool limit",
        "Before increasing the connection pool size, first check whether the app is leaking connections",
        "Raise the pool limit only after confirming the database has spare connection slots",
    ),
    (
        "Set the pool acquire timeout below the upstream request timeout so callers fail fast instead of queueing",
        "Keep the connection acquisition timeout shorter than the request deadline so waiting requests error out quickly rather than pile up",
        "Set a maximum connection lifetime so the pool recycles connections before the database drops them",
    ),
    (
        "Lower the record TTL a day ahead of any planned DNS cutover",
        "Reduce DNS time-to-live values at least 24 hours before moving a hostname to new addresses",
        "Keep the old DNS records serving until traffic to the old addresses has fallen to zero",
    ),
    (
        "Verify resolution from inside the cluster, not just from a laptop, after changing a DNS record",
        "After editing a DNS entry, confirm it resolves correctly from pods in the cluster rather than only from your workstation",
        "Run at least two resolver replicas in the cluster so one crash does not break name lookups",
    ),
    (
        "Renew TLS certificates at least two weeks before they expire",
        "Replace expiring TLS certs no later than 14 days before their expiry date",
        "Reload services after renewing a certificate because they keep serving the old one from memory",
    ),
    (
        "Deploy the full intermediate chain along with the leaf certificate",
        "Always ship the intermediate CA certificates together with the server certificate, not the leaf alone",
        "Monitor the certificate expiry dates of third-party endpoints we call, not just our own",
    ),
    (
        "Undo the new build first when failures begin minutes after it ships, and dig into causes later",
        "If the error rate climbs immediately following a release, revert to the previous version before debugging",
        "Keep the previous release artifact available so a rollback does not require a rebuild",
    ),
    (
        "Confirm the database migration is backward compatible before rolling back application code",
        "Check that the schema change works with the old version of the app before reverting a deploy",
        "Pause the deploy pipeline during a rollback so a new release does not roll forward over it",
    ),
    (
        "Delete or compress old log files before expanding the volume when a disk fills up",
        "When a filesystem is full, clean up and gzip stale logs first instead of immediately growing the disk",
        "Find the process still holding deleted log files open, since deleting them frees no space until it closes them",
    ),
    (
        "Alert on disk usage at 80 percent so there is time to act before the volume is full",
        "Page when a volume passes 80% capacity, leaving room to respond before it reaches 100%",
        "Put the database data directory on its own volume so application logs cannot fill it",
    ),
    (
        "Scale out the consumers when queue lag grows steadily and the consumers are CPU bound",
        "Add more consumer instances if the backlog keeps rising while the existing workers are saturated on CPU",
        "Do not add consumers beyond the number of partitions, because the extra consumers sit idle",
    ),
    (
        "Check for a poison message blocking the partition before adding consumers for queue lag",
        "Before scaling consumers because of lag, look for a single bad message the consumer keeps failing on and retrying",
        "Alert on consumer lag measured as time behind the head of the queue, not as a message count",
    ),
    (
        "Do not flush the whole cache during peak hours, because the cold cache overloads the database",
        "Avoid clearing all cache entries at busy times, since the resulting misses hammer the database",
        "Flush only the keys affected by the bad data instead of the whole cache",
    ),
    (
        "Add jitter to cache expiry times so keys do not all expire together",
        "Randomize the TTLs of cached entries to prevent a mass simultaneous expiration",
        "Use request coalescing so only one caller recomputes an expired hot key",
    ),
    (
        "Return 429 with a Retry-After header when a client exceeds its rate limit",
        "When throttling a caller over its quota, respond with status 429 and tell it when to retry",
        "Exempt internal health checks from the public rate limiter",
    ),
    (
        "Raise the rate limit for the single tenant rather than globally when one customer is throttled",
        "If only one customer is hitting throttling, increase that tenant's quota instead of the global limit",
        "Rate limit by API key rather than by client IP, since many customers share NAT addresses",
    ),
    (
        "Turn off the feature flag before rolling back the deploy when a newly enabled feature misbehaves",
        "If a freshly enabled feature causes errors, disable its flag first rather than reverting the whole release",
        "Remove a feature flag from the code once it has been fully rolled out for a month",
    ),
    (
        "Enable a new feature flag for a small percentage of traffic first",
        "Roll out a new flag to a small slice of users before turning it on for everyone",
        "Make the disabled path the default when the flag service is unreachable",
    ),
    (
        "Capture a heap dump before restarting a service that is leaking memory",
        "Take a heap snapshot of the leaking process prior to restarting it, so the evidence is not lost",
        "Set a container memory limit so a leaking service is restarted before it starves the node",
    ),
    (
        "Treat a restart as temporary relief for a memory leak and track a fix for the leak itself",
        "Follow every restart for a memory leak with a ticket to fix the leak, since the restart only buys time",
        "Compare heap growth against the deploy timeline to find which release introduced the leak",
    ),
    (
        "Drain read traffic from a database replica before restarting it",
        "Move the read queries off the replica before you restart it",
        "Rebuild a replica from a fresh snapshot when its lag keeps growing after a restart",
    ),
    (
        "Check that replication lag is near zero before failing over to the replica",
        "Only promote the replica once it has caught up with the primary",
        "Update the connection string or DNS alias after a failover, because clients keep talking to the old primary",
    ),
    (
        "Restart the pods one at a time rather than all at once",
        "Do a rolling restart of the pods instead of restarting every instance simultaneously",
        "Read the pod's recent logs for the crash reason before restarting it",
    ),
    (
        "Wait for connections to drain before removing instances during a scale in",
        "Let in-flight connections finish before terminating instances when scaling in",
        "Never scale in below three instances, so losing one zone still leaves capacity",
    ),
    (
        "Roll out the new credentials to all clients before revoking the old ones",
        "Keep the old secret valid until every consumer has switched to the rotated one",
        "Store rotated secrets in the vault, never in the deploy manifests",
    ),
    (
        "Cordon the node before draining it so no new pods are scheduled there",
        "Mark a node unschedulable first, then evict its pods",
        "Check pod disruption budgets before draining a node, because a strict budget blocks the eviction",
    ),
    (
        "Block the abusive source by IP at the load balancer rather than inside the application",
        "Filter the attacking addresses at the edge load balancer instead of in application code",
        "Put an expiry on every IP block so legitimate users behind that address are not cut off forever",
    ),
    (
        "Add exponential backoff with jitter to client retries to avoid a retry storm",
        "Make clients retry with randomized, exponentially increasing delays so they do not overwhelm the recovering service",
        "Cap retries at three attempts and make only idempotent requests retryable",
    ),
    (
        "Lower the pool size per instance when scaling out so total connections stay below the database maximum",
        "When adding instances, reduce each instance's pool so the sum of connections does not exceed the database connection limit",
        "Lower the pool limit when the database CPU is saturated, because more concurrent queries make it slower",
    ),
    (
        "Restart clients that cache DNS forever after a record change, such as JVMs with an infinite TTL",
        "After a DNS change, bounce processes that never refresh their resolver cache, like Java apps with an unlimited DNS TTL",
        "Use the internal DNS name of a service rather than its IP address in configuration",
    ),
];

/// A remediation failure's incident title and verdict note.
type Failure = (&'static str, &'static str);

/// Remediation-failure triples: action label, target, then (incident title, note) for the
/// anchor, for the same failure in other words, and for a different failure of the same action
/// on the same target.
const FAILURES: &[(&str, &str, Failure, Failure, Failure)] = &[
    (
        "Raise the connection-pool limit",
        "payments-api",
        (
            "Checkout requests time out",
            "the pool filled again within minutes because connections were leaking",
        ),
        (
            "Payment API latency spike",
            "leaked connections used up the larger pool just as quickly",
        ),
        (
            "Payments errors after traffic surge",
            "the database hit its connection maximum and refused the extra connections",
        ),
    ),
    (
        "Restart the service",
        "search-api",
        (
            "Search latency high",
            "memory grew back to the limit within an hour, the leak remained",
        ),
        (
            "Search pods OOM killed",
            "heap usage climbed back to the limit shortly after, since the leak was still there",
        ),
        (
            "Search 500 errors",
            "the crash came from a bad config value that was loaded again at startup",
        ),
    ),
    (
        "Roll back the last deploy",
        "orders",
        (
            "Orders error rate up",
            "errors continued because the migration had already run and the old code could not read the new column",
        ),
        (
            "Order placement failing",
            "the previous version failed against the already migrated database schema",
        ),
        (
            "Orders slow",
            "the slowdown came from a downstream inventory outage, not from the release",
        ),
    ),
    (
        "Flush the cache",
        "catalog-cache",
        (
            "Stale prices shown",
            "the stale entries came back because the upstream feed still served old prices",
        ),
        (
            "Catalog showing old prices",
            "the cache refilled with the same outdated values from the source feed",
        ),
        (
            "Catalog latency",
            "the flush sent every request to the database and made latency worse",
        ),
    ),
    (
        "Scale out (add instances)",
        "event-consumer",
        (
            "Queue lag growing",
            "lag kept growing because one poison message blocked the partition",
        ),
        (
            "Consumer backlog",
            "a single malformed message stuck the partition, so more consumers did not help",
        ),
        (
            "Events delayed",
            "the topic has only four partitions, so the new consumers sat idle",
        ),
    ),
    (
        "Fail over the database",
        "users-db",
        (
            "User logins failing",
            "the app kept connecting to the old primary through a cached DNS entry",
        ),
        (
            "Login errors",
            "clients still resolved the old primary's address from their DNS cache",
        ),
        (
            "Profile writes failing",
            "the replica was minutes behind and recent writes were lost after promotion",
        ),
    ),
    (
        "Disable the feature flag",
        "recommendations",
        (
            "Homepage errors",
            "the flag service was unreachable, so clients kept the cached enabled value",
        ),
        (
            "Recommendation widget broken",
            "clients held their cached flag state as enabled since they could not reach the flag service",
        ),
        (
            "Homepage slow",
            "the feature's background job kept running regardless of the flag",
        ),
    ),
    (
        "Rotate credentials / certificates",
        "gateway",
        (
            "TLS handshake errors",
            "the new certificate was missing the intermediate chain",
        ),
        (
            "Clients reject TLS",
            "the rotated cert was deployed without its intermediate CA bundle",
        ),
        (
            "Gateway 401s",
            "the old key was revoked before all services picked up the new one",
        ),
    ),
    (
        "Drain the node",
        "node-pool-b",
        (
            "Pods pending",
            "a pod disruption budget blocked eviction so the drain never finished",
        ),
        (
            "Node maintenance stuck",
            "eviction was refused by a strict disruption budget and the drain hung",
        ),
        (
            "Pods evicted repeatedly",
            "the disk pressure moved to the next node because the log volume was the real cause",
        ),
    ),
    (
        "Lower the connection-pool limit",
        "reports-db",
        (
            "Database CPU saturated",
            "the load came from a single unindexed report query, not from concurrency",
        ),
        (
            "Report database overloaded",
            "one slow query without an index caused the load, so fewer connections did not help",
        ),
        (
            "Reports timing out",
            "requests queued for connections and timed out at the gateway",
        ),
    ),
];

/// Thresholds the table covers.
const THRESHOLDS: [f32; 8] = [0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90];

/// A threshold within this much of the best F1 counts as tied; the tie goes to precision.
const F1_TIE: f64 = 0.02;

/// One labelled pair's cosine.
struct Scored {
    lesson: bool,
    same: bool,
    cosine: f32,
    a: String,
    b: String,
}

fn failure_text(action: &str, target: &str, incident: usize, (title, note): Failure) -> String {
    format!("{action} on {target} during INC-{incident} ({title}) did not resolve it: {note}")
}

fn cosine(x: &[f32], y: &[f32]) -> f32 {
    let dot: f32 = x.iter().zip(y).map(|(a, b)| a * b).sum();
    let nx: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
    let ny: f32 = y.iter().map(|a| a * a).sum::<f32>().sqrt();
    dot / (nx * ny)
}

/// Nearest-rank percentile of sorted `v`.
fn pct(v: &[f32], p: f64) -> f32 {
    v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

fn stats(label: &str, scored: &[Scored], keep: impl Fn(&Scored) -> bool) {
    let mut v: Vec<f32> = scored
        .iter()
        .filter(|s| keep(s))
        .map(|s| s.cosine)
        .collect();
    if v.is_empty() {
        return;
    }
    v.sort_by(f32::total_cmp);
    println!(
        "{label:<28} {:>3}  {:.3}  {:.3}  {:.3}  {:.3}  {:.3}",
        v.len(),
        v[0],
        pct(&v, 0.1),
        pct(&v, 0.5),
        pct(&v, 0.9),
        v[v.len() - 1]
    );
}

/// (precision, recall, F1) of "cosine ≥ t ⇒ same" over the pairs `keep` selects.
fn prf(scored: &[Scored], t: f32, keep: impl Fn(&Scored) -> bool) -> (f64, f64, f64) {
    let (mut tp, mut fp, mut fneg) = (0usize, 0usize, 0usize);
    for s in scored.iter().filter(|s| keep(s)) {
        match (s.cosine >= t, s.same) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fneg += 1,
            (false, false) => {}
        }
    }
    let p = if tp + fp == 0 {
        1.0
    } else {
        tp as f64 / (tp + fp) as f64
    };
    let r = tp as f64 / (tp + fneg).max(1) as f64;
    let f1 = if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    };
    (p, r, f1)
}

/// Embeds the labelled set and prints the tables; see the module doc.
fn main() -> anyhow::Result<()> {
    incidentmind::startup::prepare();
    let embedder = BuiltinEmbedder::load(&minilm::default_dir())?;
    // (lesson?, same?, a, b)
    let mut pairs: Vec<(bool, bool, String, String)> = Vec::new();
    for (anchor, same, other) in LESSONS {
        pairs.push((true, true, anchor.to_string(), same.to_string()));
        pairs.push((true, false, anchor.to_string(), other.to_string()));
    }
    for (i, (action, target, anchor, same, other)) in FAILURES.iter().enumerate() {
        let base = 100 + 10 * i;
        let a = failure_text(action, target, base, *anchor);
        pairs.push((
            false,
            true,
            a.clone(),
            failure_text(action, target, base + 1, *same),
        ));
        pairs.push((
            false,
            false,
            a,
            failure_text(action, target, base + 2, *other),
        ));
    }
    let texts: Vec<String> = pairs
        .iter()
        .flat_map(|(_, _, a, b)| [a.clone(), b.clone()])
        .collect();
    let vectors = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(embedder.embed(&texts))?;
    let scored: Vec<Scored> = pairs
        .into_iter()
        .zip(vectors.chunks(2))
        .map(|((lesson, same, a, b), v)| Scored {
            lesson,
            same,
            cosine: cosine(&v[0], &v[1]),
            a,
            b,
        })
        .collect();

    println!(
        "model {}; {} lesson triples, {} failure triples",
        embedder.model(),
        LESSONS.len(),
        FAILURES.len()
    );
    println!();
    println!("class                          n   min    p10    median p90    max");
    stats("same rule (all)", &scored, |s| s.same);
    stats("different rule (all)", &scored, |s| !s.same);
    stats("same rule (lessons)", &scored, |s| s.same && s.lesson);
    stats("different rule (lessons)", &scored, |s| !s.same && s.lesson);
    stats("same rule (failures)", &scored, |s| s.same && !s.lesson);
    stats("different rule (failures)", &scored, |s| {
        !s.same && !s.lesson
    });

    println!();
    println!("threshold  precision recall  F1     | lessons P / R   | failures P / R");
    let mut rows = Vec::new();
    for t in THRESHOLDS {
        let (p, r, f1) = prf(&scored, t, |_| true);
        let (lp, lr, _) = prf(&scored, t, |s| s.lesson);
        let (fp, fr, _) = prf(&scored, t, |s| !s.lesson);
        println!(
            "{t:.2}       {p:.3}     {r:.3}   {f1:.3}  | {lp:.3} / {lr:.3}   | {fp:.3} / {fr:.3}"
        );
        rows.push((t, p, r, f1));
    }
    let best_f1 = rows.iter().map(|r| r.3).fold(0.0, f64::max);
    let chosen = rows
        .iter()
        .filter(|r| r.3 >= best_f1 - F1_TIE)
        .max_by(|x, y| x.1.total_cmp(&y.1).then(x.0.total_cmp(&y.0)))
        .copied()
        .unwrap_or(rows[0]);

    println!();
    println!("closest calls (same rule below 0.75, different rule at or above 0.65):");
    let mut near: Vec<&Scored> = scored
        .iter()
        .filter(|s| (s.same && s.cosine < 0.75) || (!s.same && s.cosine >= 0.65))
        .collect();
    near.sort_by(|x, y| x.cosine.total_cmp(&y.cosine));
    for s in near {
        println!(
            "  {:.3} {:<9} {} | {}",
            s.cosine,
            if s.same { "same" } else { "different" },
            s.a,
            s.b
        );
    }

    println!();
    println!(
        "chosen threshold {:.2}: precision {:.3}, recall {:.3}, F1 {:.3} (best F1 {best_f1:.3}; \
         ties within {F1_TIE} go to precision)",
        chosen.0, chosen.1, chosen.2, chosen.3
    );
    Ok(())
}
