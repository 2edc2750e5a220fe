//! Diagnostic IPC messages (dotnet/diagnostics `ipc-protocol.md`): a 20-byte header
//! (`DOTNET_IPC_V1\0`, u16 total size, u8 command set, u8 command id, u16 reserved), then the
//! payload. Replies: `0xFF 0x00` (OK) with a command-specific payload, or `0xFF 0xFF` (error) with
//! an HRESULT.

use std::io::{Read, Write};

use super::{DiagError, DiagErrorKind};

/// The magic that starts every message: `DOTNET_IPC_V1` and a NUL.
pub const MAGIC: &[u8; 14] = b"DOTNET_IPC_V1\0";
/// The header's size.
pub const HEADER_LEN: usize = 20;
/// The server command set (replies).
pub const SERVER: u8 = 0xFF;
/// Server OK.
pub const OK: u8 = 0x00;
/// Server error.
pub const ERROR: u8 = 0xFF;
/// `CORDIAGIPC_E_BAD_ENCODING`.
pub const E_BAD_ENCODING: u32 = 0x8013_1384;
/// `CORDIAGIPC_E_UNKNOWN_COMMAND`: the runtime does not know this command (too old).
pub const E_UNKNOWN_COMMAND: u32 = 0x8013_1385;
/// `CORDIAGIPC_E_UNKNOWN_MAGIC`.
pub const E_UNKNOWN_MAGIC: u32 = 0x8013_1386;
/// `CORPROF_E_PROFILER_ALREADY_ACTIVE`: AttachProfiler to a process that has a profiler.
pub const CORPROF_E_PROFILER_ALREADY_ACTIVE: u32 = 0x8013_136A;

/// One message: command set, command id and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The command set (0x02 EventPipe, 0x04 Process, 0xFF server replies).
    pub command_set: u8,
    /// The command id.
    pub command_id: u8,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Message {
    /// The message's bytes: header and payload. A payload that makes the message longer than
    /// 65535 bytes is refused.
    pub fn encode(&self) -> Result<Vec<u8>, DiagError> {
        let size =
            self.payload.len().checked_add(HEADER_LEN).and_then(|n| u16::try_from(n).ok()).ok_or_else(|| DiagError::new(DiagErrorKind::BadArgument, "a diagnostics message of at most 65535 bytes"))?;
        let mut out = Vec::with_capacity(usize::from(size));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&size.to_le_bytes());
        out.push(self.command_set);
        out.push(self.command_id);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.payload);
        Ok(out)
    }
}

/// Map a read error: a timeout, a peer that went away, or another I/O error.
pub(crate) fn read_error(e: &std::io::Error, what: &str) -> DiagError {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::WouldBlock | K::TimedOut => DiagError::new(DiagErrorKind::Timeout, format!("no answer while waiting for {what}")),
        K::UnexpectedEof | K::ConnectionReset | K::BrokenPipe => DiagError::new(DiagErrorKind::Protocol, format!("the connection closed while waiting for {what}")),
        _ => DiagError::new(DiagErrorKind::Io, format!("reading {what}: {e}")),
    }
}

/// Write a whole message.
pub fn send(stream: &mut impl Write, message: &Message) -> Result<(), DiagError> {
    let bytes = message.encode()?;
    stream.write_all(&bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => DiagError::new(DiagErrorKind::Timeout, "the diagnostics server did not take the request"),
        _ => DiagError::new(DiagErrorKind::Io, format!("sending a diagnostics request: {e}")),
    })
}

/// Read one message. Its size comes from the header (at most 65535 bytes), so what is allocated is
/// bounded before anything is read into it.
pub fn receive(stream: &mut impl Read) -> Result<Message, DiagError> {
    let mut header = [0u8; HEADER_LEN];
    stream.read_exact(&mut header).map_err(|e| read_error(&e, "the diagnostics server's reply"))?;
    let (magic, rest) = header.split_at(MAGIC.len());
    if magic != MAGIC {
        return Err(DiagError::new(DiagErrorKind::Protocol, "the reply does not start with DOTNET_IPC_V1: this socket is not a .NET diagnostics server"));
    }
    let [s0, s1, command_set, command_id, _, _] = <[u8; 6]>::try_from(rest).map_err(|_| DiagError::new(DiagErrorKind::Protocol, "a 20-byte header"))?;
    let size = usize::from(u16::from_le_bytes([s0, s1]));
    let len = size.checked_sub(HEADER_LEN).ok_or_else(|| DiagError::new(DiagErrorKind::Protocol, format!("a reply size of at least 20 bytes (got {size})")))?;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).map_err(|e| read_error(&e, "the reply's payload"))?;
    Ok(Message { command_set, command_id, payload })
}

/// The payload of an OK reply; an error reply becomes an error with its HRESULT
/// (`unsupported_command` for `CORDIAGIPC_E_UNKNOWN_COMMAND`); anything else is a protocol error.
pub fn expect_ok(reply: Message, command: &str) -> Result<Vec<u8>, DiagError> {
    match (reply.command_set, reply.command_id) {
        (SERVER, OK) => Ok(reply.payload),
        (SERVER, ERROR) => {
            let hr = match reply.payload.get(..4) {
                Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
                _ => return Err(DiagError::new(DiagErrorKind::Protocol, "an error reply without its HRESULT")),
            };
            let (kind, what) = match hr {
                E_UNKNOWN_COMMAND => (DiagErrorKind::UnsupportedCommand, format!("the runtime does not know {command} (it is too old for it)")),
                E_BAD_ENCODING => (DiagErrorKind::ServerError, format!("the runtime could not decode {command}")),
                E_UNKNOWN_MAGIC => (DiagErrorKind::ServerError, format!("the runtime did not accept the message header of {command}")),
                CORPROF_E_PROFILER_ALREADY_ACTIVE => (DiagErrorKind::ServerError, format!("the runtime refused {command}: a profiler is already loaded in the process")),
                _ => (DiagErrorKind::ServerError, format!("the runtime refused {command}")),
            };
            Err(DiagError::new(kind, format!("{what} (HRESULT 0x{hr:08X})")).with_hresult(hr))
        }
        (set, id) => Err(DiagError::new(DiagErrorKind::Protocol, format!("a reply with command 0x{set:02X} 0x{id:02X}, not 0xFF 0x00 or 0xFF 0xFF"))),
    }
}

/// Little-endian payload writer.
#[derive(Debug, Default)]
pub struct Payload(pub Vec<u8>);

impl Payload {
    /// A u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// Raw bytes (a GUID, in its in-memory layout).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.extend_from_slice(bytes);
        self
    }
    /// An array of bytes: u32 count, then the bytes.
    pub fn array(&mut self, bytes: &[u8]) -> &mut Self {
        self.u32(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
        self.raw(bytes)
    }
    /// A string: u32 length in UTF-16 units including the NUL, then UTF-16LE; an empty string is
    /// length 0.
    pub fn string(&mut self, s: &str) -> &mut Self {
        if s.is_empty() {
            return self.u32(0);
        }
        let units: Vec<u16> = s.encode_utf16().chain(std::iter::once(0)).collect();
        self.u32(u32::try_from(units.len()).unwrap_or(u32::MAX));
        for u in units {
            self.0.extend_from_slice(&u.to_le_bytes());
        }
        self
    }
}

/// Little-endian payload reader over a reply (every read bounds-checked).
#[derive(Debug)]
pub struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// Read fields from a payload.
    pub fn new(payload: &'a [u8]) -> Self {
        Fields { rest: payload }
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DiagError> {
        if self.rest.len() < n {
            return Err(DiagError::new(DiagErrorKind::Protocol, format!("a reply cut inside {what}")));
        }
        let (a, b) = self.rest.split_at(n);
        self.rest = b;
        Ok(a)
    }
    /// A u64.
    pub fn u64(&mut self, what: &str) -> Result<u64, DiagError> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(<[u8; 8]>::try_from(b).map_err(|_| DiagError::new(DiagErrorKind::Protocol, what.to_owned()))?))
    }
    /// `n` raw bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], DiagError> {
        self.take(n, what)
    }
    /// A string (u32 count of UTF-16 units, NUL included). The count is checked against the bytes
    /// left before anything is allocated.
    pub fn string(&mut self, what: &str) -> Result<String, DiagError> {
        let b = self.take(4, what)?;
        let n = u32::from_le_bytes(<[u8; 4]>::try_from(b).map_err(|_| DiagError::new(DiagErrorKind::Protocol, what.to_owned()))?);
        let bytes = usize::try_from(n).ok().and_then(|n| n.checked_mul(2)).ok_or_else(|| DiagError::new(DiagErrorKind::Protocol, format!("a reply cut inside {what}")))?;
        let raw = self.take(bytes, what)?;
        let units: Vec<u16> = raw.chunks_exact(2).map(|c| u16::from_le_bytes([c.first().copied().unwrap_or(0), c.get(1).copied().unwrap_or(0)])).collect();
        let end = units.iter().position(|&u| u == 0).unwrap_or(units.len());
        Ok(String::from_utf16_lossy(units.get(..end).unwrap_or(&[])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_and_replies() {
        let m = Message { command_set: 2, command_id: 1, payload: 7u64.to_le_bytes().to_vec() };
        let b = m.encode().unwrap();
        assert_eq!(b.len(), 28);
        assert_eq!(&b[..14], MAGIC);
        assert_eq!(&b[14..20], &[28, 0, 2, 1, 0, 0]);
        assert_eq!(receive(&mut &b[..]).unwrap(), m);
        let err = Message { command_set: 0xFF, command_id: 0xFF, payload: E_UNKNOWN_COMMAND.to_le_bytes().to_vec() };
        let e = expect_ok(err, "ProcessInfo").unwrap_err();
        assert_eq!((e.kind, e.hresult), (DiagErrorKind::UnsupportedCommand, Some(E_UNKNOWN_COMMAND)));
        // A size below the header, a wrong magic, a cut payload: protocol errors, never a panic.
        let mut bad = b.clone();
        bad[14] = 3;
        assert_eq!(receive(&mut &bad[..]).unwrap_err().kind, DiagErrorKind::Protocol);
        bad[0] = b'X';
        assert_eq!(receive(&mut &bad[..]).unwrap_err().kind, DiagErrorKind::Protocol);
        assert_eq!(receive(&mut &b[..25]).unwrap_err().kind, DiagErrorKind::Protocol);
        let big = Message { command_set: 2, command_id: 3, payload: vec![0; 65516] };
        assert_eq!(big.encode().unwrap_err().kind, DiagErrorKind::BadArgument);
    }

    #[test]
    fn strings_round_trip_and_hostile_counts_fail() {
        let mut p = Payload::default();
        p.string("héllo").string("");
        assert_eq!(&p.0[..4], &6u32.to_le_bytes());
        let mut f = Fields::new(&p.0);
        assert_eq!(f.string("s").unwrap(), "héllo");
        assert_eq!(f.string("s").unwrap(), "");
        let hostile = u32::MAX.to_le_bytes();
        assert_eq!(Fields::new(&hostile).string("s").unwrap_err().kind, DiagErrorKind::Protocol);
    }
}
