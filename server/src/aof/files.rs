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
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || format!("Invalid AOF manifest file format (>>> '{line}')");
            let words: Vec<&str> = line.split_whitespace().collect();
            if !words.len().is_multiple_of(2) {
                return Err(bad());
            }
            let (mut name, mut seq, mut ty) = (None, None, None);
            for kv in words.chunks(2) {
                match kv[0] {
                    "file" => name = Some(kv[1].to_string()),
                    "seq" => seq = kv[1].parse::<u64>().ok(),
                    "type" => ty = Some(kv[1]),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(ty)) = (name, seq, ty) else {
                return Err(bad());
            };
            match ty {
                "b" => {
                    if m.base.is_some() {
                        return Err("Found duplicate base file information".into());
                    }
                    m.base = Some((name, seq))
                }
                "i" => m.incrs.push((name, seq)),
                "h" => m.history.push((name, seq)),
                _ => return Err(bad()),
            }
        }
        if m.base.is_none() && m.incrs.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Some((n, q)) = &self.base {
            s.push_str(&format!("file {n} seq {q} type b\n"));
        }
        for (n, q) in &self.history {
            s.push_str(&format!("file {n} seq {q} type h\n"));
        }
        for (n, q) in &self.incrs {
            s.push_str(&format!("file {n} seq {q} type i\n"));
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

pub(crate) fn temp_incr_name(name: &str) -> String {
    format!("temp-{name}.incr")
}

pub(crate) fn next_incr_seq(m: &Manifest) -> u64 {
    m.incrs
        .iter()
        .chain(&m.history)
        .map(|i| i.1)
        .max()
        .unwrap_or(0)
        + 1
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
    }
}
