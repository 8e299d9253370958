//! LOLWUT: the version's computer art, as Redis 7.0 draws it. VERSION 5
//! is Georg Nees's "Schotter" (squares that tilt and scatter more with
//! every row) in Braille dots; VERSION 6 a skyline in four ANSI greys;
//! any other version (7 by default) prints only the version line.

use super::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error};
use bytes::Bytes;
use rand::Rng;
use std::f64::consts::{FRAC_PI_2, FRAC_PI_4};

pub static HANDLERS: &[(&str, Handler)] = &[("lolwut", lolwut)];

const VERSION_LINE: &str = "Redis ver. 7.0.15\n";

/// LOLWUT [VERSION version [args…]]
fn lolwut(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let (version, args) = if a.len() >= 3 && is(&a[1], "version") {
        (int_arg(&a[2])?, &a[3..])
    } else {
        (7, &a[1..])
    };
    let num = |i: usize, default: i64, max: i64| -> Result<i64, Error> {
        Ok(args
            .get(i)
            .map(|v| int_arg(v))
            .transpose()?
            .unwrap_or(default)
            .clamp(1, max))
    };
    let art = match version {
        5 => schotter(num(0, 66, 1000)?, num(1, 8, 200)?, num(2, 12, 200)?),
        6 => skyline(num(0, 80, 1000)?, num(1, 20, 1000)?),
        _ => VERSION_LINE.to_string(),
    };
    c.out.verbatim(art.as_bytes());
    Ok(())
}

/// A monochrome bitmap, printed two pixels wide and four high per
/// Braille character.
struct Canvas {
    w: i64,
    h: i64,
    px: Vec<bool>,
}

impl Canvas {
    fn new(w: i64, h: i64) -> Canvas {
        Canvas {
            w,
            h,
            px: vec![false; (w * h) as usize],
        }
    }

    fn set(&mut self, x: i64, y: i64) {
        if (0..self.w).contains(&x) && (0..self.h).contains(&y) {
            self.px[(y * self.w + x) as usize] = true;
        }
    }

    fn get(&self, x: i64, y: i64) -> bool {
        (0..self.w).contains(&x) && (0..self.h).contains(&y) && self.px[(y * self.w + x) as usize]
    }

    /// Bresenham's line.
    fn line(&mut self, (mut x, mut y): (i64, i64), (x1, y1): (i64, i64)) {
        let (dx, dy) = ((x1 - x).abs(), -(y1 - y).abs());
        let (sx, sy) = ((x1 - x).signum(), (y1 - y).signum());
        let mut err = dx + dy;
        loop {
            self.set(x, y);
            if x == x1 && y == y1 {
                return;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// A square of side `side` centred on (`x`, `y`), turned by `angle`.
    fn square(&mut self, x: i64, y: i64, side: f64, angle: f64) {
        let r = side / std::f64::consts::SQRT_2;
        let corner = |k: f64| {
            let t = angle + FRAC_PI_4 + k * FRAC_PI_2;
            (
                x + (t.sin() * r).round() as i64,
                y + (t.cos() * r).round() as i64,
            )
        };
        for k in 0..4 {
            self.line(corner(k as f64), corner((k + 1) as f64));
        }
    }

    fn braille(&self) -> String {
        // Dot bits of a Braille cell, by row, for its left and right column.
        const BITS: [[u32; 2]; 4] = [[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]];
        let mut out = String::new();
        for row in (0..self.h).step_by(4) {
            for col in (0..self.w).step_by(2) {
                let mut bits = 0;
                for (dy, pair) in BITS.iter().enumerate() {
                    for (dx, bit) in pair.iter().enumerate() {
                        if self.get(col + dx as i64, row + dy as i64) {
                            bits |= bit;
                        }
                    }
                }
                out.push(char::from_u32(0x2800 + bits).unwrap_or(' '));
            }
            out.push('\n');
        }
        out
    }
}

fn schotter(cols: i64, per_row: i64, per_col: i64) -> String {
    let w = cols * 2;
    let pad = if w > 4 { 2 } else { 0 };
    let side = (w - pad * 2) / per_row;
    let mut canvas = Canvas::new(w, side * per_col + pad * 2);
    let mut rng = rand::thread_rng();
    for y in 0..per_col {
        for x in 0..per_row {
            let mut cx = (x * side + side / 2 + pad) as f64;
            let mut cy = (y * side + side / 2 + pad) as f64;
            let mut angle = 0.0;
            // The first two rows stay in order; disorder grows from there.
            if y > 1 {
                let mut jitter = || {
                    let sign = if rng.gen::<bool>() { 1.0 } else { -1.0 };
                    rng.gen::<f64>() / per_col as f64 * y as f64 * sign
                };
                angle = jitter();
                cx += jitter() * side as f64 / 3.0;
                cy += jitter() * side as f64 / 3.0;
            }
            canvas.square(cx as i64, cy as i64, side as f64, angle);
        }
    }
    format!(
        "{}\nGeorg Nees - schotter, plotter on paper, 1968. {VERSION_LINE}",
        canvas.braille()
    )
}

/// Sky, far buildings, near buildings, nearest buildings: ANSI colours
/// (foreground;background) from light to dark.
const SHADES: [&str; 4] = ["97;107", "37;47", "90;100", "30;40"];

fn skyline(cols: i64, rows: i64) -> String {
    let (w, h) = (cols as usize, rows as usize);
    let mut shade = vec![0usize; w * h];
    let mut rng = rand::thread_rng();
    // Three layers of buildings, each nearer one darker and lower, with
    // windows lit in the shade of the layer behind.
    for layer in 1..=3 {
        let mut x = rng.gen_range(0..4usize);
        while x < w {
            let width = rng.gen_range(4..=12usize);
            let max = (h * (5 - layer) / 5).max(1);
            let top = h - rng.gen_range(max / 2..=max).max(1);
            for bx in x..(x + width).min(w) {
                for (y, row) in shade.chunks_mut(w).enumerate().skip(top) {
                    let window = bx > x && bx + 1 < x + width && (bx - x) % 3 != 0 && y > top;
                    row[bx] = if window && (y - top) % 2 == 0 && rng.gen_bool(0.6) {
                        layer - 1
                    } else {
                        layer
                    };
                }
            }
            x += width + rng.gen_range(1..4usize);
        }
    }
    let mut out = String::new();
    for row in shade.chunks(w) {
        for &s in row {
            out.push_str(&format!("\x1b[0;{}m \x1b[0m", SHADES[s]));
        }
        out.push('\n');
    }
    out.push_str("Dedicated to the 8 bit game developers of past and present.\n");
    out.push_str(&format!(
        "Original 8 bit image from Plaguemon by hikikomori. {VERSION_LINE}"
    ));
    out
}
