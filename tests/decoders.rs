//! The decoders of files from elsewhere (reproducers, schedules, corpus
//! entries) under thousands of mutated inputs: no panic, no allocation past
//! the documented budget, and every refusal an error value (which the
//! commands turn into one line and exit code 2).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rewind_fuzz::rwd::Rwd;
use rewind_fuzz::rwd::format::{MAX_DECODED, MAX_PAYLOAD};

/// Counts live heap bytes and their peak, so a test can see what one call
/// allocated at most.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counters are only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The most a call allocated beyond what was live before it.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = f();
    (r, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// A real reproducer, recorded by the CLI.
fn sample_rwd() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::read(common::hello_rwd(dir.path())).unwrap()
}

/// One random change to `data`: flip bits, overwrite with interesting
/// bytes (varint prefixes of huge lengths), cut, duplicate or insert.
fn mutate(rng: &mut ChaCha8Rng, data: &mut Vec<u8>, from: usize) {
    let len = data.len();
    if len <= from {
        data.push(rng.next_u32() as u8);
        return;
    }
    let at = from + rng.next_u32() as usize % (len - from);
    match rng.next_u32() % 6 {
        0 => data[at] ^= 1 << (rng.next_u32() % 8),
        1 => {
            // A bincode varint announcing a u64 length, then a huge one.
            let huge = [0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
            let n = huge.len().min(len - at);
            data[at..at + n].copy_from_slice(&huge[..n]);
        }
        2 => data.truncate(at),
        3 => {
            let n = (rng.next_u32() as usize % 64).min(len - at);
            let chunk = data[at..at + n].to_vec();
            data.splice(at..at, chunk);
        }
        4 => data.insert(at, rng.next_u32() as u8),
        _ => data[at] = [0x00, 0xff, 0xfb, 0xfc, 0xfe][rng.next_u32() as usize % 5],
    }
}

/// A reproducer file around `payload` (the header's declared length right).
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = b"RWD\0".to_vec();
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend(zstd::encode_all(payload, 1).unwrap());
    out
}

/// The budget a file may cost: its payload (decompressed, at most the
/// limit), the decoding budget, and the file itself.
fn budget(file_len: usize) -> usize {
    MAX_PAYLOAD as usize * 2 + MAX_DECODED + file_len * 2
}

#[test]
fn mutated_reproducers_never_panic_or_allocate_past_the_budget() {
    let good = sample_rwd();
    let payload = zstd::decode_all(&good[16..]).unwrap();
    assert!(Rwd::decode("good", &good).is_ok());
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    let (mut refused, mut cases) = (0, 0);
    // Mutations of the file (mostly caught by zstd's checksum) and of the
    // payload, recompressed (which reach bincode and the checks).
    for case in 0..1500 {
        let (bytes, from) = if case % 3 == 0 {
            (good.clone(), 0)
        } else {
            (payload.clone(), 0)
        };
        let mut data = bytes;
        for _ in 0..1 + rng.next_u32() % 4 {
            mutate(&mut rng, &mut data, from);
        }
        let file = if case % 3 == 0 { data } else { frame(&data) };
        let (result, peak) = peak_of(|| Rwd::decode("case", &file));
        cases += 1;
        refused += result.is_err() as u32;
        assert!(
            peak <= budget(file.len()),
            "case {case}: {peak} bytes allocated ({:?})",
            result.err()
        );
        if let Err(e) = result {
            let msg = e.to_string();
            assert!(
                !msg.is_empty() && !msg.contains('\n'),
                "case {case}: {msg:?}"
            );
        }
    }
    assert!(
        refused > cases / 2,
        "{refused} of {cases} refused: the mutations bite"
    );
}

#[test]
fn mutated_schedules_and_corpus_entries_never_panic() {
    use rewind_fuzz::fuzz::ScheduleInput;
    use rewind_fuzz::sched::Schedule;
    let schedule = br#"{"version":2,"origin":"random seed 7","sync_points":"atomics","decisions":[{"step":3,"thread":2},{"step":9,"thread":1},{"step":40,"thread":3}]}"#;
    let input = br#"{"target":0,"decisions":[{"step":47,"thread":2},{"step":60,"thread":1}],"tail":{"kind":"random","seed":12459329905844355028}}"#;
    // The unmutated ones are good: mutations start from valid files.
    assert!(Schedule::from_json("good", schedule).is_ok());
    assert!(ScheduleInput::parse(input, 0).is_ok());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for case in 0..3000 {
        let mut a = schedule.to_vec();
        let mut b = input.to_vec();
        for _ in 0..1 + rng.next_u32() % 4 {
            mutate(&mut rng, &mut a, 0);
            mutate(&mut rng, &mut b, 0);
        }
        let (_, peak) = peak_of(|| {
            let _ = Schedule::from_json("case", &a);
            let _ = ScheduleInput::parse(&b, 0);
        });
        assert!(peak < 16 << 20, "case {case}: {peak} bytes");
    }
}
