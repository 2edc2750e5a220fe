//! pprof: a gzipped `profile.proto` (github.com/google/pprof, proto/profile.proto), the format
//! `go tool pprof`, Pyroscope, Grafana and Parca read. Each function is a method with its file;
//! each location one symbolized address: its `Line` entries innermost first (the inlinees, then
//! the physical method at the call site), as pprof models inlining. Sample types
//! `samples`/`count` and `cpu`/`nanoseconds` (samples × the sampling interval, the period); a
//! per-thread profile labels each sample with `thread_id`.

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use super::Profile;

/// `perftools.profiles.Profile`, the fields written.
#[derive(Clone, PartialEq, Message)]
struct PProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<PSample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct PSample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "3")]
    num: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    ids: HashMap<String, i64>,
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = i64::try_from(self.table.len()).unwrap_or(i64::MAX);
        self.table.push(s.to_owned());
        self.ids.insert(s.to_owned(), i);
        i
    }
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Profile {
    /// Write the gzipped profile.
    pub fn write_pprof(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let mut strings = Strings::default();
        strings.id("");
        let (samples_s, count_s, cpu_s, ns_s, thread_s) = (strings.id("samples"), strings.id("count"), strings.id("cpu"), strings.id("nanoseconds"), strings.id("thread_id"));
        // Functions: (name, file) pairs; ids from 1.
        let mut functions: Vec<Function> = Vec::new();
        let mut function_of: HashMap<(i64, i64), u64> = HashMap::new();
        let mut frame_function: Vec<u64> = Vec::with_capacity(self.frames.len());
        for f in &self.frames {
            let name = strings.id(&f.label());
            let file = strings.id(f.file.as_deref().unwrap_or(""));
            let id = *function_of.entry((name, file)).or_insert_with(|| {
                let id = (functions.len() as u64).saturating_add(1);
                functions.push(Function { id, name, system_name: name, filename: file });
                id
            });
            frame_function.push(id);
        }
        // Locations: ids from 1; lines innermost first.
        let location: Vec<Location> = self
            .locations
            .iter()
            .enumerate()
            .map(|(i, frames)| Location {
                id: (i as u64).saturating_add(1),
                line: frames
                    .iter()
                    .rev()
                    .map(|&f| Line { function_id: frame_function.get(f as usize).copied().unwrap_or(0), line: self.frames.get(f as usize).and_then(|x| x.line).map(i64::from).unwrap_or(0) })
                    .collect(),
            })
            .collect();
        let mut locs = Vec::new();
        let sample = self
            .stacks()
            .map(|(thread, node, n)| {
                self.locations_leaf_first(node, &mut locs);
                PSample {
                    location_id: locs.iter().map(|&l| u64::from(l).saturating_add(1)).collect(),
                    value: vec![i64_of(n), i64_of(n.saturating_mul(self.interval_ns))],
                    label: if self.per_thread { vec![Label { key: thread_s, num: i64_of(thread) }] } else { Vec::new() },
                }
            })
            .collect();
        let profile = PProfile {
            sample_type: vec![ValueType { r#type: samples_s, unit: count_s }, ValueType { r#type: cpu_s, unit: ns_s }],
            sample,
            location,
            function: functions,
            string_table: strings.table,
            duration_nanos: i64_of(self.duration_ns),
            period_type: Some(ValueType { r#type: cpu_s, unit: ns_s }),
            period: i64_of(self.interval_ns),
            default_sample_type: cpu_s,
        };
        let bytes = profile.encode_to_vec();
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        gz.write_all(&bytes)?;
        gz.finish()?;
        Ok(())
    }
}
