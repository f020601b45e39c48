//! Claude Code's project slug: the folder under `projects/` where it files a cwd's sessions.
//! Here, beneath both the harness traits ([`crate::harness::SessionFiles`]) and the Claude Code
//! adapter, which use it.

/// Longest project slug Claude Code uses whole; a longer one is cut and given a hash.
const SLUG_MAX: usize = 200;

/// The name of the directory under `$CLAUDE_CONFIG_DIR/projects/` where Claude Code files the
/// sessions of a process whose cwd is `cwd`: every UTF-16 code unit that is not an ASCII letter or
/// digit becomes `-`; a slug over 200 units keeps its first 200 and gets `-` plus the base-36
/// absolute value of the 32-bit string hash of `cwd` (`h = 31*h + unit`, wrapping). Read from the
/// pinned CLI (2.1.197) and checked by the end-to-end test of a home moving to another folder.
pub fn project_slug(cwd: &str) -> String {
    let units: Vec<u16> = cwd.encode_utf16().collect();
    let slug: String = units.iter().map(|&u| if u < 128 && (u as u8).is_ascii_alphanumeric() { u as u8 as char } else { '-' }).collect();
    if units.len() <= SLUG_MAX {
        return slug;
    }
    let mut h: i32 = 0;
    for &u in &units {
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u));
    }
    format!("{}-{}", &slug[..SLUG_MAX], base36(i64::from(h).unsigned_abs()))
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if n == 0 {
        return "0".into();
    }
    let mut out = Vec::new();
    while n > 0 {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}
