//! The AOF directory's files: the manifest naming the base and incr files
//! (`file <name> seq <n> type b|h|i` lines, as Redis 7.0 writes them) and
//! the helpers that create, name and sync them.

use super::*;

/// The files the manifest lists.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// (name, seq); the base may be `.rdb` (preamble) or `.aof`.
    pub base: Option<(String, u64)>,
    pub incrs: Vec<(String, u64)>,
    /// History files (type h), listed only until they are deleted.
    pub history: Vec<(String, u64)>,
    /// The seq of the last incr file opened. Not written: as Redis's, it
    /// outlives the incr files a rewrite with the AOF off drops, and is
    /// taken again from the last `type i` line whenever a manifest is read
    /// (start-up, DEBUG LOADAOF), history lines not counted.
    pub incr_seq: u64,
}

impl Manifest {
    /// Reads a manifest as Redis 7.0 does: `#` comments, pairs of words,
    /// lines under 1024 bytes, no blank line, one base, incr files in
    /// rising sequence. The error is Redis's log text.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        const MAX_LINE: usize = 1024;
        let mut m = Manifest::default();
        let mut last_incr = 0;
        for (no, raw) in text.split_inclusive('\n').enumerate() {
            if raw.len() >= MAX_LINE + usize::from(raw.ends_with('\n')) {
                return Err("\nThe AOF manifest file contains too long line".into());
            }
            let line = raw.trim_end_matches(['\r', '\n']);
            if line.starts_with('#') {
                continue;
            }
            let bad = |msg: &str| {
                format!(
                    "\nReading the manifest file, at line {}\n>>> '{line}'\n{msg}",
                    no + 1
                )
            };
            let invalid = || bad("Invalid AOF manifest file format");
            // Names with spaces are quoted, as Redis writes them.
            let words = protocol::split_args(line.as_bytes()).unwrap_or_default();
            if words.is_empty() || !words.len().is_multiple_of(2) {
                return Err(invalid());
            }
            let (mut name, mut seq, mut ty) = (None, None, None);
            for kv in words.chunks(2) {
                let v = String::from_utf8_lossy(&kv[1]).into_owned();
                match &kv[0][..] {
                    b"file" => name = Some(v),
                    b"seq" => seq = v.parse::<u64>().ok().filter(|&n| n > 0),
                    b"type" => ty = Some(v),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(ty)) = (name, seq, ty) else {
                return Err(invalid());
            };
            match ty.as_str() {
                "b" if m.base.is_some() => {
                    return Err(bad("Found duplicate base file information"))
                }
                "b" => m.base = Some((name, seq)),
                "i" if seq <= last_incr => {
                    return Err(bad("Found a non-monotonic sequence number"))
                }
                "i" => {
                    last_incr = seq;
                    m.incr_seq = seq;
                    m.incrs.push((name, seq))
                }
                "h" => m.history.push((name, seq)),
                _ => return Err(bad("Unknown AOF file type")),
            }
        }
        if m.base.is_none() && m.incrs.is_empty() {
            return Err("\nFound an empty AOF manifest".into());
        }
        Ok(m)
    }

    /// Lists a new incr file, `<name>.<seq>.incr.aof`; returns its name.
    pub(crate) fn add_incr(&mut self, name: &str) -> String {
        self.incr_seq += 1;
        let incr = format!("{name}.{}.incr.aof", self.incr_seq);
        self.incrs.push((incr.clone(), self.incr_seq));
        incr
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let base = self.base.iter().map(|f| (f, 'b'));
        let history = self.history.iter().map(|f| (f, 'h'));
        for ((n, q), ty) in base
            .chain(history)
            .chain(self.incrs.iter().map(|f| (f, 'i')))
        {
            let n = if n.contains(' ') {
                protocol::repr(n.as_bytes())
            } else {
                n.clone()
            };
            s.push_str(&format!("file {n} seq {q} type {ty}\n"));
        }
        s
    }
}

pub fn aof_dir(st: &State) -> PathBuf {
    PathBuf::from(&st.cfg.dir).join(&st.cfg.appenddirname)
}

pub(crate) fn fname(st: &State) -> String {
    st.cfg.appendfilename.clone()
}

pub(crate) fn fsync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

pub(crate) fn write_manifest(dir: &Path, name: &str, m: &Manifest) -> io::Result<()> {
    let tmp = dir.join(format!("temp-{name}.manifest"));
    let mut f = File::create(&tmp)?;
    f.write_all(m.render().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(format!("{name}.manifest")))?;
    fsync_dir(dir);
    Ok(())
}

pub(crate) fn open_append(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// A new incr file, empty even if a file of its name is there: the seq
/// count starts again from the manifest read, so the name may be one a
/// history file still has, whose old commands must not be loaded again.
pub(crate) fn create_incr(path: &Path) -> io::Result<File> {
    drop(File::create(path)?);
    open_append(path)
}

pub(crate) fn temp_incr_name(name: &str) -> String {
    format!("temp-{name}.incr")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.render(), text);
        assert!(Manifest::parse("garbage line").is_err());
        assert!(Manifest::parse("").is_err());
        let spaced = "file \"my file.aof.1.incr.aof\" seq 1 type i\n";
        let m = Manifest::parse(spaced).unwrap();
        assert_eq!(m.incrs[0].0, "my file.aof.1.incr.aof");
        assert_eq!(m.render(), spaced);
    }

    /// Each manifest Redis 7.0.15 refuses, with the last line of its log.
    #[test]
    fn refused_manifests() {
        let long = format!("file a seq 1 type i{}\n", " ".repeat(1005));
        for (text, msg) in [
            (
                "file a.2 seq 2 type i\nfile a.1 seq 1 type i\n",
                "Found a non-monotonic sequence number",
            ),
            (
                "file a.1 seq 1 type i\n\nfile a.3 seq 3 type i\n",
                "Invalid AOF manifest file format",
            ),
            (
                "file a seq 1 type b\nfile b seq 2 type b\n",
                "Found duplicate base file information",
            ),
            ("file a seq 1 type x\n", "Unknown AOF file type"),
            ("filx a seq 1 type b\n", "Invalid AOF manifest file format"),
            ("file a type i\n", "Invalid AOF manifest file format"),
            (
                "file a seq 1 type i newkey\n",
                "Invalid AOF manifest file format",
            ),
            ("file a seq x type i\n", "Invalid AOF manifest file format"),
            ("", "Found an empty AOF manifest"),
            ("# only a comment\n", "Found an empty AOF manifest"),
            (&long, "The AOF manifest file contains too long line"),
        ] {
            let e = Manifest::parse(text).unwrap_err();
            assert!(e.ends_with(msg), "{text:?}: {e}");
        }
        let longest = format!("file a seq 1 type i{}\n", " ".repeat(1004));
        assert!(
            Manifest::parse(&longest).is_ok(),
            "1023 bytes and a newline"
        );
        assert!(Manifest::parse("# c\nfile a seq 1 type i foo bar\n").is_ok());
    }
}
