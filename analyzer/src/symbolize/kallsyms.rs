//! The kernel's symbols from a kallsyms file or snapshot.

/// The kernel's symbols from a kallsyms snapshot (`ADDR TYPE NAME [MODULE]` lines).
pub struct Kallsyms {
    /// The file's text; names are slices of it.
    text: String,
    /// (address, name start, name length), sorted by address.
    syms: Vec<(u64, u32, u32)>,
}

impl Kallsyms {
    pub fn parse(text: &str) -> Kallsyms {
        Kallsyms::from_text(text.to_string())
    }

    fn from_text(text: String) -> Kallsyms {
        let mut syms = Vec::with_capacity(text.len() / 40);
        let mut off = 0usize;
        for line in text.split_inclusive('\n') {
            let start = off;
            off += line.len();
            let b = line.as_bytes();
            // `ADDR TYPE NAME[\t[MODULE]]`
            let Some(sp) = b.iter().position(|&c| c == b' ') else { continue };
            if b.len() < sp + 4 || b[sp + 2] != b' ' || !matches!(b[sp + 1], b't' | b'T' | b'w' | b'W') {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(&line[..sp], 16) else { continue };
            let name = &line[sp + 3..];
            let len = name.find(['\t', ' ', '\n', '\r']).unwrap_or(name.len());
            if addr == 0 || len == 0 {
                continue;
            }
            syms.push((addr, (start + sp + 3) as u32, len as u32));
        }
        syms.sort_unstable_by_key(|s| s.0);
        Kallsyms { text, syms }
    }

    /// Read a kallsyms file (plain or gzipped); an empty or address-less file is an error,
    /// since it would leave every kernel sample unresolved.
    pub fn load(path: &std::path::Path) -> crate::Result<Kallsyms> {
        Kallsyms::load_reusing(path, None)
    }

    /// [`Kallsyms::load`], returning `prev` instead of parsing again when the file holds
    /// the same text.
    pub fn load_reusing(path: &std::path::Path, prev: Option<Kallsyms>) -> crate::Result<Kallsyms> {
        use collector::files::Kind;
        let bytes = collector::files::read(path, Kind::Kallsyms)?;
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            String::from_utf8_lossy(&collector::files::gunzip(path, &bytes, Kind::Kallsyms)?).into_owned()
        } else {
            String::from_utf8_lossy(&bytes).into_owned()
        };
        if let Some(p) = prev.filter(|p| p.text == text && !p.is_empty()) {
            return Ok(p);
        }
        let k = Kallsyms::from_text(text);
        if k.is_empty() {
            return Err(crate::Error::Kallsyms {
                path: path.display().to_string(),
                msg: "no text symbols with addresses: expected `ADDRESS TYPE NAME` lines as in /proc/kallsyms \
                      read by root"
                    .into(),
            });
        }
        Ok(k)
    }

    /// This machine's /proc/kallsyms, if readable with addresses.
    pub fn current() -> Option<Kallsyms> {
        Kallsyms::load(std::path::Path::new("/proc/kallsyms")).ok()
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The address of the first text symbol called `name` (a reference symbol such as
    /// `_text`).
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.syms.iter().find(|&&(_, s, l)| self.text.get(s as usize..(s + l) as usize) == Some(name)).map(|s| s.0)
    }

    /// Move every symbol by `delta` bytes (the kernel loaded elsewhere on another boot).
    pub fn shift(&mut self, delta: i64) {
        for s in &mut self.syms {
            s.0 = s.0.wrapping_add_signed(delta);
        }
    }

    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (_, start, len) = self.syms[i];
        self.text.get(start as usize..(start + len) as usize)
    }
}
