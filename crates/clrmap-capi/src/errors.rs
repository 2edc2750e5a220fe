//! The thread's last error (symbolic-cabi's model) and the landing pad every export runs in.
//!
//! Every export body runs inside [`ffi_fn!`]: a panic is caught there and never unwinds into C,
//! and a body that fails returns a [`Failure`], which the landing pad records as the thread's
//! last error (`clrmap_last_error`) before it answers the failure's HRESULT. So each export says
//! what went wrong once, with `?`, and no export can forget to record it.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, PoisonError};

use clrmap::read::{ErrorFamily, Location};
use clrmap::symbolizer::OpenError;
use clrmap::ErrorKind;

use crate::hresult::{hresult_of_kind, CLRMAP_E_UNRECOGNIZED_FILE, E_BAD_FILE_TYPE, E_FAIL, E_FILE_NOT_FOUND, E_POINTER, HRESULT, S_FALSE, S_OK};

/// The landing pad of an export: its body runs inside `catch_unwind`, so no panic unwinds into
/// C (a panic answers E_FAIL and is recorded as an internal error).
///
/// * `ffi_fn!({ body })`, for an export that answers an HRESULT: the body returns
///   `Result<HRESULT, Failure>`; an `Err` is recorded as the thread's last error and its HRESULT
///   answered.
/// * `ffi_fn!(unrecorded PANICKED, { body })`, for the calls that must leave the last error as it
///   is (`AddRef`, `Release`, the last-error calls themselves): the body returns the answer
///   itself, and a panic answers `PANICKED`.
///
/// The exports keep their `#[no_mangle] extern "C"` signatures outside the macro, because cbindgen
/// writes the header from them and does not expand macros.
macro_rules! ffi_fn {
    (unrecorded $panicked:expr, $body:block) => {
        ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)).unwrap_or_else(|_| $panicked)
    };
    ($body:block) => {
        $crate::errors::landing_pad(|| -> ::core::result::Result<$crate::hresult::HRESULT, $crate::errors::Failure> { $body })
    };
}

/// Run an export's body (see [`ffi_fn!`]): its answer, or its failure recorded and answered.
pub(crate) fn landing_pad(body: impl FnOnce() -> Result<HRESULT, Failure>) -> HRESULT {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(hr)) => hr,
        Ok(Err(failure)) => failure.record(),
        Err(_) => Failure::new(E_FAIL, "an internal error (a panic, caught)").record(),
    }
}

/// Why an export failed: the HRESULT it answers, and what the thread's last error says.
#[derive(Debug)]
pub(crate) struct Failure {
    hr: HRESULT,
    /// The library error, when there is one (its kind, location and expectation reach C).
    error: Option<clrmap::Error>,
    message: String,
}

impl Failure {
    /// A failure that is no library error (a null argument, a file that cannot be opened).
    pub(crate) fn new(hr: HRESULT, message: impl Into<String>) -> Failure {
        Failure { hr, error: None, message: message.into() }
    }

    /// A library error answered with another HRESULT than its kind's (the runtime's, where it
    /// has one).
    pub(crate) fn answered_as(hr: HRESULT, error: clrmap::Error) -> Failure {
        Failure { hr, message: error.to_string(), error: Some(error) }
    }

    /// A null pointer where one is required.
    pub(crate) fn null_argument() -> Failure {
        Failure::new(E_POINTER, "a required pointer argument is NULL")
    }

    /// A source that did not open: a path that is not a regular file is
    /// `CLRMAP_E_BAD_FILE_TYPE`, one that cannot be read HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND),
    /// a malformed file its kind's HRESULT, a file of no known format
    /// `CLRMAP_E_UNRECOGNIZED_FILE`. A torn trace or capture opens (S_OK) with every whole record.
    pub(crate) fn not_opened(e: &OpenError) -> Failure {
        let message = e.to_string();
        match e {
            OpenError::Io { error, .. } if error.kind() == std::io::ErrorKind::InvalidInput => Failure::new(E_BAD_FILE_TYPE, message),
            OpenError::Io { .. } => Failure::new(E_FILE_NOT_FOUND, message),
            OpenError::Input { error, .. } | OpenError::NoModule { error, .. } => Failure { hr: hresult_of_kind(error.kind), error: Some(*error), message },
            OpenError::Unrecognized { .. } => Failure::new(CLRMAP_E_UNRECOGNIZED_FILE, message),
        }
    }

    /// Record this failure as the thread's last error and return its HRESULT.
    fn record(self) -> HRESULT {
        let last = LastError { hr: self.hr, error: self.error, expected: c_string(self.error.map_or("", |e| e.expected)), message: c_string(&self.message) };
        // A thread being torn down has no slot left: the HRESULT still answers.
        let _ = LAST_ERROR.try_with(|slot| slot.replace(Some(last)));
        self.hr
    }
}

/// A library error, answered with its kind's HRESULT.
impl From<clrmap::Error> for Failure {
    fn from(error: clrmap::Error) -> Failure {
        Failure::answered_as(hresult_of_kind(error.kind), error)
    }
}

/// `ClrmapError::location_kind`: the error has no place in any input.
pub const CLRMAP_LOCATION_NOWHERE: u32 = 0;
/// `ClrmapError::location_kind`: `location` is an absolute byte offset in the input.
pub const CLRMAP_LOCATION_OFFSET: u32 = 1;
/// `ClrmapError::location_kind`: `location` is an RVA asked about or pointed to.
pub const CLRMAP_LOCATION_RVA: u32 = 2;
/// `ClrmapError::location_kind`: `location` is an address in a traced process.
pub const CLRMAP_LOCATION_ADDRESS: u32 = 3;
/// `ClrmapError::location_kind`: `location` is a byte offset in the inflated bytes of a PDB
/// embedded (deflated) in the image, which is no offset of the image file itself.
pub const CLRMAP_LOCATION_INFLATED: u32 = 4;

/// The last error of the calling thread (`clrmap_last_error`). `kind` and `family` are static
/// strings; `expected` and `message` stay valid until the next clrmap call that fails on the same
/// thread, or `clrmap_clear_last_error`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ClrmapError {
    /// The HRESULT the failing call returned.
    pub hr: HRESULT,
    /// `CLRMAP_LOCATION_NOWHERE`, `..._OFFSET`, `..._RVA`, `..._ADDRESS` or `..._INFLATED`.
    pub location_kind: u32,
    /// The offset, RVA, address or offset in the inflated embedded PDB (0 for NOWHERE).
    pub location: u64,
    /// The error kind's stable id (`"bad_image"`, as the CLI prints it), or NULL when the failure
    /// is not a library error (a null argument, a file that cannot be opened, an unrecognized
    /// file).
    pub kind: *const c_char,
    /// The kind's family: `"parse"`, `"validity"` or `"resolve"`; NULL when `kind` is NULL.
    pub family: *const c_char,
    /// What was expected at the location (`"a ReadyToRun major from 3 to 27"`), or "".
    pub expected: *const c_char,
    /// The whole message, as the CLI prints it (`"bad_image at offset 60: expected ..."`).
    pub message: *const c_char,
}

/// The recorded failure of a thread.
struct LastError {
    hr: HRESULT,
    error: Option<clrmap::Error>,
    expected: CString,
    message: CString,
}

thread_local! {
    static LAST_ERROR: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// `s` as a C string (without the NULs it may hold, which C could not see past).
pub(crate) fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// The kind's id ([`ErrorKind::as_str`], the library's name for it) as a C string that lives as
/// long as the program, as `ClrmapError::kind` promises: each kind's is made the first time it
/// is asked for and kept (one per kind, so the memory is bounded).
fn kind_c_str(kind: ErrorKind) -> *const c_char {
    static NAMES: Mutex<Vec<(ErrorKind, &'static CStr)>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, name)) = names.iter().find(|(k, _)| *k == kind) {
        return name.as_ptr();
    }
    let name: &'static CStr = Box::leak(c_string(kind.as_str()).into_boxed_c_str());
    names.push((kind, name));
    name.as_ptr()
}

fn family_c_str(family: ErrorFamily) -> &'static CStr {
    match family {
        ErrorFamily::Parse => c"parse",
        ErrorFamily::Validity => c"validity",
        ErrorFamily::Resolve => c"resolve",
    }
}

/// The calling thread's last error: S_OK and `*out` filled when a clrmap call failed on this
/// thread since the last `clrmap_clear_last_error`; S_FALSE and `*out` zeroed (NULL strings) when
/// none did; E_POINTER for a NULL `out`. Successful calls leave the last error as it was.
#[no_mangle]
pub unsafe extern "C" fn clrmap_last_error(out: *mut ClrmapError) -> HRESULT {
    // Unrecorded: asking for the last error must not replace it.
    ffi_fn!(unrecorded S_FALSE, {
        if out.is_null() {
            return E_POINTER;
        }
        let answer = LAST_ERROR.try_with(|slot| slot.try_borrow().ok().and_then(|last| last.as_ref().map(c_error))).ok().flatten();
        let none = ClrmapError { hr: S_OK, location_kind: CLRMAP_LOCATION_NOWHERE, location: 0, kind: std::ptr::null(), family: std::ptr::null(), expected: std::ptr::null(), message: std::ptr::null() };
        let hr = if answer.is_some() { S_OK } else { S_FALSE };
        // SAFETY: `out` is non-null and points to a writable ClrmapError, per the contract.
        unsafe { *out = answer.unwrap_or(none) };
        hr
    })
}

/// The C view of a recorded failure; its strings live in `last`.
fn c_error(last: &LastError) -> ClrmapError {
    let (location_kind, location) = match last.error.map(|e| e.location) {
        Some(Location::Offset(o)) => (CLRMAP_LOCATION_OFFSET, o),
        Some(Location::Rva(r)) => (CLRMAP_LOCATION_RVA, u64::from(r)),
        Some(Location::Address(a)) => (CLRMAP_LOCATION_ADDRESS, a),
        Some(Location::Inflated(o)) => (CLRMAP_LOCATION_INFLATED, o),
        _ => (CLRMAP_LOCATION_NOWHERE, 0),
    };
    ClrmapError {
        hr: last.hr,
        location_kind,
        location,
        kind: last.error.map_or(std::ptr::null(), |e| kind_c_str(e.kind)),
        family: last.error.map_or(std::ptr::null(), |e| family_c_str(e.kind.family()).as_ptr()),
        expected: last.expected.as_ptr(),
        message: last.message.as_ptr(),
    }
}

/// Forget the calling thread's last error (and free its strings).
#[no_mangle]
pub extern "C" fn clrmap_clear_last_error() {
    ffi_fn!(unrecorded(), {
        let _ = LAST_ERROR.try_with(|slot| slot.try_borrow_mut().map(|mut last| last.take()));
    })
}
