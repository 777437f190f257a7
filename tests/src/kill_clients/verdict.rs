//! A campaign's counts and its verdict: kills by phase and by work, reclaim times,
//! rigd's use before and after, and the `RESULT` line the guest scenario reads.

use std::time::Duration;

use super::{Cycle, Usage, Work};

/// What the verdict allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Reclaim's goal (docs/RELIABILITY.md, "Clients killed by the thousand"): p99 at
    /// most this.
    pub goal: Duration,
    /// Whether a p99 past the goal fails the campaign, or is only reported (under
    /// TCG rigd's reclaim of a whole-device lease, a VFIO reset of an emulated
    /// device, is far slower than on hardware).
    pub judge_goal: bool,
    /// A reclaim that takes longer is a failure.
    pub give_up: Duration,
    /// How much RSS may grow: the allocator keeps freed pages, and tonic's
    /// per-connection buffers reach their high-water mark, but thousands of leaked
    /// sessions would be far more.
    pub rss_slack_kib: u64,
    /// tokio's blocking pool keeps an idle thread for 10 s, so the count at any
    /// instant moves by the few that the last cycles' reclaims started; leaked
    /// threads would be one per cycle.
    pub thread_slack: u64,
}

/// A campaign's result.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub cycles: u64,
    pub seed: u64,
    pub limits: Limits,
    /// Kills by the phase the client had reached: none, connected, session,
    /// leased, holding.
    pub by_phase: [u64; 5],
    /// Kills by work ([`Work::ALL`]'s order).
    pub by_work: [u64; 3],
    /// The latest a kill landed, per work.
    pub latest_kill: [Option<Duration>; 3],
    pub client_errors: Vec<String>,
    pub stuck: Vec<String>,
    /// Reclaim times of the kills that left something to reclaim, all and per work.
    pub reclaims: Vec<Duration>,
    pub reclaims_by_work: [Vec<Duration>; 3],
    pub baseline: Usage,
    pub after: Usage,
    pub took: Duration,
}

impl Verdict {
    pub(super) fn new(cycles: u64, seed: u64, limits: Limits) -> Self {
        let empty = Usage {
            proc: super::ProcUsage::default(),
            rpc: super::RpcCounts::default(),
            extra: Vec::new(),
            shown: Vec::new(),
        };
        Self {
            cycles,
            seed,
            limits,
            by_phase: [0; 5],
            by_work: [0; 3],
            latest_kill: [None; 3],
            client_errors: Vec::new(),
            stuck: Vec::new(),
            reclaims: Vec::new(),
            reclaims_by_work: [Vec::new(), Vec::new(), Vec::new()],
            baseline: empty.clone(),
            after: empty,
            took: Duration::ZERO,
        }
    }

    pub(super) fn count(&mut self, work: Work, c: &Cycle, i: u64) {
        self.by_phase[c.phase] += 1;
        self.by_work[work.index()] += 1;
        if let Some(r) = c.reclaim {
            self.reclaims.push(r);
            self.reclaims_by_work[work.index()].push(r);
        }
        if let Some(e) = &c.error {
            let line = format!("cycle {i}: {e}");
            if c.stuck {
                self.stuck.push(line);
            } else {
                self.client_errors.push(line);
            }
        }
    }

    /// Whether everything came back: no client error, no reclaim past the give-up
    /// time, fds, sessions, blocks, queues and holders at their baseline, threads
    /// and RSS within their slack, and (where judged) reclaim p99 within the goal.
    pub fn passed(&self) -> bool {
        let (b, a) = (&self.baseline, &self.after);
        let l = &self.limits;
        self.client_errors.is_empty()
            && self.stuck.is_empty()
            && a.proc.fds <= b.proc.fds
            && a.proc.threads <= b.proc.threads + l.thread_slack
            && a.proc.rss_kib <= b.proc.rss_kib + l.rss_slack_kib
            && a.rpc.sessions <= b.rpc.sessions
            && a.rpc.leased_blocks <= b.rpc.leased_blocks
            && a.rpc.queues <= b.rpc.queues
            && a.rpc.lease_holders <= b.rpc.lease_holders
            && a.extra == b.extra
            && (!l.judge_goal || self.p(0.99) <= l.goal)
    }

    pub fn goal_met(&self) -> bool {
        self.p(0.99) <= self.limits.goal
    }

    pub fn p(&self, q: f64) -> Duration {
        percentile(&self.reclaims, q)
    }

    /// rigd's figures: (name, baseline, after), the judged ones first, then those
    /// only shown.
    pub fn before_after(&self) -> Vec<(&'static str, u64, u64)> {
        let (b, a) = (&self.baseline, &self.after);
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        let mut v = vec![
            ("rss_kib", b.proc.rss_kib, a.proc.rss_kib),
            ("rss_anon_kib", b.proc.rss_anon_kib, a.proc.rss_anon_kib),
            ("fds", n(b.proc.fds), n(a.proc.fds)),
            ("threads", b.proc.threads, a.proc.threads),
            ("sessions", n(b.rpc.sessions), n(a.rpc.sessions)),
            (
                "leased_blocks",
                u64::from(b.rpc.leased_blocks),
                u64::from(a.rpc.leased_blocks),
            ),
            ("queues", n(b.rpc.queues), n(a.rpc.queues)),
            (
                "lease_holders",
                n(b.rpc.lease_holders),
                n(a.rpc.lease_holders),
            ),
        ];
        let pairs = b
            .extra
            .iter()
            .zip(&a.extra)
            .chain(b.shown.iter().zip(&a.shown));
        v.extend(pairs.map(|((name, x), (_, y))| (*name, *x, *y)));
        v
    }

    fn word(&self) -> &'static str {
        if self.passed() { "PASS" } else { "FAIL" }
    }

    /// One line for scripts: `RESULT cycles= kills_by_phase= reclaim_p50= p99= max=
    /// … name=before→after … verdict=`.
    pub fn result_line(&self) -> String {
        let [none, c, s, l, h] = self.by_phase;
        let ms = |d: Duration| format!("{:.1}ms", d.as_secs_f64() * 1e3);
        let mut line = format!(
            "RESULT cycles={} seed={} kills_by_phase=none:{none},connected:{c},session:{s},\
             leased:{l},holding:{h} kills_by_work=dma:{},lease:{},queue:{} reclaimed={} \
             reclaim_p50={} p99={} max={} goal_p99={} goal={}",
            self.cycles,
            self.seed,
            self.by_work[0],
            self.by_work[1],
            self.by_work[2],
            self.reclaims.len(),
            ms(self.p(0.5)),
            ms(self.p(0.99)),
            ms(self.p(1.0)),
            ms(self.limits.goal),
            if self.goal_met() { "met" } else { "missed" },
        );
        for (name, before, after) in self.before_after() {
            line.push_str(&format!(" {name}={before}→{after}"));
        }
        line.push_str(&format!(
            " client_errors={} not_reclaimed={} verdict={}",
            self.client_errors.len(),
            self.stuck.len(),
            self.word()
        ));
        line
    }
}

/// The `q` quantile of `v` (nearest rank); zero for none.
pub fn percentile(v: &[Duration], q: f64) -> Duration {
    let mut sorted = v.to_vec();
    sorted.sort_unstable();
    let count = |k: usize| f64::from(u32::try_from(k).unwrap_or(u32::MAX));
    let total = count(sorted.len());
    // The first value with at least a q share of them at or below it.
    let rank = (1..=sorted.len()).find(|&k| count(k) >= q * total);
    rank.map_or(Duration::ZERO, |k| sorted[k - 1])
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [none, c, s, l, h] = self.by_phase;
        writeln!(
            f,
            "kills: {} in {:.1} s; killed before connecting {none}, connected {c}, \
             session open {s}, leased {l}, holding {h}",
            self.cycles,
            self.took.as_secs_f64(),
        )?;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        writeln!(
            f,
            "reclaim (kill to rigd showing nothing of the pid, {} with something held): \
             p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (goal p99 <= {} ms: {})",
            self.reclaims.len(),
            ms(self.p(0.5)),
            ms(self.p(0.99)),
            ms(self.p(1.0)),
            self.limits.goal.as_millis(),
            if self.goal_met() { "met" } else { "missed" }
        )?;
        for w in Work::ALL {
            let i = w.index();
            let (Some(latest), r) = (self.latest_kill[i], &self.reclaims_by_work[i]) else {
                continue;
            };
            writeln!(
                f,
                "  {} ({} kills, the latest at {:.0} ms): {} reclaimed, p50 {:.2} ms, \
                 p99 {:.2} ms, max {:.2} ms",
                w.name(),
                self.by_work[i],
                ms(latest),
                r.len(),
                ms(percentile(r, 0.5)),
                ms(percentile(r, 0.99)),
                ms(percentile(r, 1.0))
            )?;
        }
        write!(f, "rigd before -> after:")?;
        for (k, (name, before, after)) in self.before_after().into_iter().enumerate() {
            let sep = if k == 0 { " " } else { ", " };
            write!(f, "{sep}{} {before} -> {after}", name.replace('_', " "))?;
        }
        writeln!(f)?;
        for e in self.client_errors.iter().take(5) {
            writeln!(f, "client error: {e}")?;
        }
        for e in self.stuck.iter().take(5) {
            writeln!(f, "not reclaimed: {e}")?;
        }
        write!(
            f,
            "violations: {} client errors, {} not reclaimed; verdict: {}",
            self.client_errors.len(),
            self.stuck.len(),
            self.word()
        )
    }
}
