//! `clrmap flame --running` on a program of our own (tests/dotnet/idle/Idle.cs): one thread spins
//! in its own code while idle thread-pool workers wait. The runtime's sampler marks each sample
//! managed or external; with the option the external ones (waits) are left out, and the spinning
//! method then holds nearly the whole profile. Checked against speedscope's per-thread profiles
//! of the same trace without the option: the spinning thread's samples are nearly all kept, the
//! waiting is gone, and the counts the note gives are the difference.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::*;

fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flame-running").join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const RUNTIMECONFIG: &str = r#"{ "runtimeOptions": { "tfm": "netcoreapp3.1", "rollForward": "LatestMajor", "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" } } }"#;

/// Idle.dll with its portable PDB, built once by Roslyn csc against the 3.1 framework (it rolls
/// forward to every later runtime).
fn built() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = work_dir("build");
        let references = [
            "System.Private.CoreLib",
            "System.Runtime",
            "System.Console",
            "System.Threading",
            "System.Threading.Tasks",
            "System.Threading.ThreadPool",
            "System.Threading.Timer",
            "System.Runtime.Extensions",
        ];
        csc_against_3_1("idle", "Idle", &references, &out, RUNTIMECONFIG);
        out
    })
}

/// speedscope's profiles of `clrmap flame TRACE [--running]`: per thread, its name, its total
/// weight and the weight of samples whose leaf is the spinning method.
fn threads(trace: &Path, dir: &Path, running: bool) -> (Vec<(String, f64, f64)>, String) {
    let out = dir.join(if running { "running.json" } else { "all.json" });
    let mut args = vec!["flame", trace.to_str().unwrap(), "--format", "speedscope", "--symbol-path", dir.to_str().unwrap(), "-o", out.to_str().unwrap()];
    if running {
        args.push("--running");
    }
    let o = clrmap(&args);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let frames = v["shared"]["frames"].as_array().unwrap();
    let is_hot: Vec<bool> = frames.iter().map(|f| f["name"].as_str().is_some_and(|n| n.starts_with("IdleProg::Spin (Idle.cs:"))).collect();
    let mut list = Vec::new();
    for p in v["profiles"].as_array().unwrap() {
        let weights = p["weights"].as_array().unwrap();
        let total: f64 = weights.iter().map(|w| w.as_f64().unwrap()).sum();
        let hot_weight: f64 = p["samples"]
            .as_array()
            .unwrap()
            .iter()
            .zip(weights)
            .filter(|(s, _)| s.as_array().unwrap().last().is_some_and(|f| is_hot[f.as_u64().unwrap() as usize]))
            .map(|(_, w)| w.as_f64().unwrap())
            .sum();
        list.push((p["name"].as_str().unwrap_or_default().to_owned(), total, hot_weight));
    }
    (list, stderr(&o))
}

#[test]
#[ignore = "needs .NET"]
fn running_keeps_the_threads_that_ran() {
    let build = built();
    for rt in current_runtimes().into_iter().filter(|r| r.major() >= 5) {
        let dir = work_dir(&rt.label());
        for f in ["Idle.dll", "Idle.pdb", "Idle.runtimeconfig.json"] {
            std::fs::copy(build.join(f), dir.join(f)).unwrap();
        }
        let trace = dir.join("idle.nettrace");
        let dotnet = rt.dotnet.to_string_lossy().into_owned();
        let o = clrmap(&["trace", "collect", "--cpu", "-o", trace.to_str().unwrap(), "--", &dotnet, dir.join("Idle.dll").to_str().unwrap(), "3"]);
        assert_eq!(code(&o), Some(0), "{}: {}", rt.label(), stderr(&o));
        let (all, _) = threads(&trace, &dir, false);
        let (kept, note) = threads(&trace, &dir, true);
        if rt.major() == 9 {
            // 9.0's sampler marks nearly every sample external, the spinning thread's too:
            // --running keeps almost nothing, and says so.
            assert!(note.contains("keeps almost nothing"), "{}: {note}", rt.label());
            continue;
        }
        let sum = |l: &[(String, f64, f64)], i: usize| l.iter().map(|t| if i == 1 { t.1 } else { t.2 }).sum::<f64>();
        // The idle workers are there without the option, and together they outweigh the
        // spinning thread (each is sampled as often as it).
        let share_all = sum(&all, 2) / sum(&all, 1);
        let share_kept = sum(&kept, 2) / sum(&kept, 1);
        let spin_kept = sum(&kept, 2) / sum(&all, 2);
        eprintln!(
            "{}: {} threads, {} kept; the spinning method {:.1}% of all, {:.1}% with --running ({:.1}% of its samples kept)",
            rt.label(),
            all.len(),
            kept.len(),
            share_all * 100.0,
            share_kept * 100.0,
            spin_kept * 100.0
        );
        // The idle workers are there without the option, and together they outweigh the
        // spinning thread (each is sampled as often as it); with it, the spinning method is
        // nearly all (a worker spinning a while for work before it blocks is running too).
        assert!(all.len() >= 4, "{}: {} threads", rt.label(), all.len());
        assert!(share_all < 0.5, "{}: the spinning method is {share_all:.3} of all threads", rt.label());
        assert!(share_kept > 0.85, "{}: the spinning method is {share_kept:.3} of what ran", rt.label());
        // Its samples are managed code, and most are marked so: the sampler marks some of a
        // thread stopped in the middle of its loop external (docs/flame.md).
        assert!(spin_kept > 0.5, "{}: {spin_kept:.3} of the spinning method's samples kept", rt.label());
        // Threads kept are threads of the whole profile, none heavier than there; the note
        // counts the samples left out and the threads that are gone.
        let names: std::collections::HashSet<&str> = kept.iter().map(|t| t.0.as_str()).collect();
        for t in &kept {
            let whole = all.iter().find(|a| a.0 == t.0).unwrap_or_else(|| panic!("{}: {t:?} is no thread of the whole profile", rt.label()));
            assert!(t.1 <= whole.1, "{}: {t:?} vs {whole:?}", rt.label());
        }
        // The waiting is what goes: of the weight that is not the spinning method, little is
        // kept. A thread that ever ran managed code (the burst of work items at start-up, a
        // worker spinning for work before it blocks) stays with those samples, so how many
        // whole threads go depends on the timing: CI once saw all six kept on 10.0.12.
        let rest_kept = (sum(&kept, 1) - sum(&kept, 2)) / (sum(&all, 1) - sum(&all, 2));
        assert!(rest_kept < 0.2, "{}: {rest_kept:.3} of the weight outside the spinning method kept", rt.label());
        let gone = all.iter().filter(|a| !names.contains(a.0.as_str())).count();
        let interval = 1e6; // the sampler's default, 1 ms, in ns
        let left = ((sum(&all, 1) - sum(&kept, 1)) / interval).round() as u64;
        assert!(note.contains(&format!("left out {left} samples")) && note.contains(&format!("with them {gone} threads")), "{}: {note} ({left} samples, {gone} threads)", rt.label());
    }
}
