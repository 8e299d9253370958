//! The geohash arithmetic of Redis's geo commands, reproduced operation for
//! operation so that scores, cells, distances and search areas come out
//! bit-identical: the 52-bit hash (26 bits of latitude in the even
//! positions, 26 of longitude in the odd ones) over the Web Mercator
//! latitude range, decoding a score to the centre of its cell, the
//! haversine distance on Redis's earth radius, and the search area of a
//! radius or box (a cell sized from the radius plus its 8 neighbours, the
//! useless ones dropped).

pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
/// The latitudes the Web Mercator projection covers.
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const STEP_MAX: u32 = 26;
const EARTH_RADIUS: f64 = 6372797.560856;
/// Half the Mercator world's width in metres: where step estimation stops.
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(d: f64) -> f64 {
    d * D_R
}

fn rad_deg(r: f64) -> f64 {
    r / D_R
}

/// A cell: `step` bits of each coordinate, interleaved. The zero cell
/// (bits 0, step 0) marks a neighbour left out of a search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    pub bits: u64,
    pub step: u32,
}

impl Cell {
    const NONE: Cell = Cell { bits: 0, step: 0 };

    /// The score range `[min, max)` of the 52-bit hashes inside the cell.
    pub fn score_range(self) -> (f64, f64) {
        let shift = 52 - 2 * self.step;
        (
            (self.bits << shift) as f64,
            ((self.bits + 1) << shift) as f64,
        )
    }
}

/// A coordinate range.
#[derive(Clone, Copy, Debug)]
struct Range {
    min: f64,
    max: f64,
}

const LON: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
const LAT: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// The bits of `v` moved to the even positions.
fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The even bits of `x`, packed (the inverse of [`spread`]).
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    ((x | (x >> 16)) & 0x0000_0000_ffff_ffff) as u32
}

/// The cell of `step` bits holding a valid position in the given ranges;
/// None outside them. The top of a range maps one past its last cell.
fn encode_in(lon: f64, lat: f64, lon_r: Range, lat_r: Range, step: u32) -> Option<Cell> {
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if !(lat_r.min..=lat_r.max).contains(&lat) || !(lon_r.min..=lon_r.max).contains(&lon) {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min) * scale;
    Some(Cell {
        bits: spread(lat_off as u32) | (spread(lon_off as u32) << 1),
        step,
    })
}

/// The cell of `step` bits of a valid position.
fn encode(lon: f64, lat: f64, step: u32) -> Option<Cell> {
    encode_in(lon, lat, LON, LAT, step)
}

/// The 52-bit score of a valid position.
pub fn geohash(lon: f64, lat: f64) -> u64 {
    encode(lon, lat, STEP_MAX).map_or(0, |c| c.bits)
}

/// A cell's bounds.
#[derive(Clone, Copy, Debug)]
struct Area {
    lon: Range,
    lat: Range,
}

fn decode_in(c: Cell, lon_r: Range, lat_r: Range) -> Area {
    let (ilat, ilon) = (squash(c.bits) as f64, squash(c.bits >> 1) as f64);
    let scale = (1u64 << c.step) as f64;
    let (lat_w, lon_w) = (lat_r.max - lat_r.min, lon_r.max - lon_r.min);
    Area {
        lat: Range {
            min: lat_r.min + (ilat / scale) * lat_w,
            max: lat_r.min + ((ilat + 1.0) / scale) * lat_w,
        },
        lon: Range {
            min: lon_r.min + (ilon / scale) * lon_w,
            max: lon_r.min + ((ilon + 1.0) / scale) * lon_w,
        },
    }
}

fn decode(c: Cell) -> Area {
    decode_in(c, LON, LAT)
}

/// The hash bits of a stored score, as C's `(uint64_t)` cast of a double
/// gives them on x86-64 (a score no GEOADD wrote still decodes somewhere).
fn score_bits(score: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    // cvttsd2si: truncation, or the "integer indefinite" out of range.
    let cvt = |x: f64| -> u64 {
        if x.is_nan() || !(-TWO63..TWO63).contains(&x) {
            1 << 63
        } else {
            x as i64 as u64
        }
    };
    if score < TWO63 {
        cvt(score)
    } else {
        cvt(score - TWO63) ^ (1 << 63)
    }
}

/// The position (longitude, latitude) a score stands for: the centre of
/// its cell, clamped to the valid ranges.
pub fn decode_score(score: f64) -> (f64, f64) {
    let a = decode(Cell {
        bits: score_bits(score),
        step: STEP_MAX,
    });
    let lon = ((a.lon.min + a.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((a.lat.min + a.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// GEOHASH's 11 characters: the position re-encoded over the standard
/// latitude range [-90, 90], 5 bits a character, the 11th always `0`.
pub fn geohash_string(lon: f64, lat: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let std_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode_in(lon, lat, LON, std_lat, STEP_MAX).map_or(0, |c| c.bits);
    let mut out = [b'0'; 11];
    for (i, ch) in out.iter_mut().take(10).enumerate() {
        *ch = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine distance in metres between two positions.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((deg_rad(lon2) - deg_rad(lon1)) / 2.0).sin();
    // Same longitude: the latitude difference alone, as Redis shortcuts.
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

/// What a search covers, around its centre; sizes in metres.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// The search: a centre, a shape in its unit, and the unit in metres.
#[derive(Clone, Copy, Debug)]
pub struct Search {
    pub lon: f64,
    pub lat: f64,
    pub shape: Shape,
    pub to_meters: f64,
    /// The centre in radians and the cosine of its latitude, computed once
    /// for all the points (the same values [`distance`] computes).
    lon_r: f64,
    lat_r: f64,
    cos_lat: f64,
}

impl Search {
    pub fn new(lon: f64, lat: f64, shape: Shape, to_meters: f64) -> Self {
        let lat_r = deg_rad(lat);
        Search {
            lon,
            lat,
            shape,
            to_meters,
            lon_r: deg_rad(lon),
            lat_r,
            cos_lat: lat_r.cos(),
        }
    }

    /// `distance(self.lon, self.lat, lon, lat)`, bit for bit.
    fn distance_from_centre(&self, lon: f64, lat: f64) -> f64 {
        let v = ((deg_rad(lon) - self.lon_r) / 2.0).sin();
        if v == 0.0 {
            return lat_distance(self.lat, lat);
        }
        let lat_r = deg_rad(lat);
        let u = ((lat_r - self.lat_r) / 2.0).sin();
        let a = u * u + self.cos_lat * lat_r.cos() * v * v;
        2.0 * EARTH_RADIUS * a.sqrt().asin()
    }

    /// The distance (metres) to a point inside the shape, None outside.
    pub fn distance_if_within(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Radius(r) => {
                let r = r * self.to_meters;
                // No great circle is shorter than the latitude difference:
                // points well outside that band are left without the
                // trigonometry (the margin covers rounding, which is worst
                // near the antipode).
                if lat_distance(self.lat, lat) > r * (1.0 + 1e-6) + 1e-3 {
                    return None;
                }
                let d = self.distance_from_centre(lon, lat);
                (d <= r).then_some(d)
            }
            Shape::Box { width, height } => {
                // The cheaper latitude test first.
                if lat_distance(lat, self.lat) > height * self.to_meters / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width * self.to_meters / 2.0 {
                    return None;
                }
                Some(self.distance_from_centre(lon, lat))
            }
        }
    }

    /// (min lon, min lat, max lon, max lat) around the shape.
    fn bounding_box(&self) -> [f64; 4] {
        let (h, w) = match self.shape {
            Shape::Radius(r) => (r, r),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (h, w) = (self.to_meters * h, self.to_meters * w);
        let lat_delta = rad_deg(h / EARTH_RADIUS);
        let lon_delta_top = rad_deg(w / EARTH_RADIUS / deg_rad(self.lat + lat_delta).cos());
        let lon_delta_bottom = rad_deg(w / EARTH_RADIUS / deg_rad(self.lat - lat_delta).cos());
        // The widest edge is the one nearer the pole.
        let lon_delta = if self.lat < 0.0 {
            lon_delta_bottom
        } else {
            lon_delta_top
        };
        [
            self.lon - lon_delta,
            self.lat - lat_delta,
            self.lon + lon_delta,
            self.lat + lat_delta,
        ]
    }

    /// The cells to scan, in Redis's order: the centre's cell, then north,
    /// south, east, west, north-east, north-west, south-east, south-west;
    /// [`Cell::NONE`] for a neighbour the search cannot reach.
    pub fn cells(&self) -> [Cell; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.to_meters;
        let mut step = estimate_steps(radius, self.lat);
        let mut cells = around(self.lon, self.lat, step);
        // A neighbour too near the centre may leave part of the area
        // uncovered: one step bigger then.
        let short = decode(cells[1]).lat.max < max_lat
            || decode(cells[2]).lat.min > min_lat
            || decode(cells[3]).lon.max < max_lon
            || decode(cells[4]).lon.min > min_lon;
        if step > 1 && short {
            step -= 1;
            cells = around(self.lon, self.lat, step);
        }
        if step >= 2 {
            let area = decode(cells[0]);
            let mut drop = |which: [usize; 3]| which.iter().for_each(|&i| cells[i] = Cell::NONE);
            if area.lat.min < min_lat {
                drop([2, 7, 8]);
            }
            if area.lat.max > max_lat {
                drop([1, 5, 6]);
            }
            if area.lon.min < min_lon {
                drop([4, 8, 6]);
            }
            if area.lon.max > max_lon {
                drop([3, 7, 5]);
            }
        }
        cells
    }
}

/// The centre's cell of `step` bits and its 8 neighbours, in scan order.
fn around(lon: f64, lat: f64, step: u32) -> [Cell; 9] {
    let c = encode(lon, lat, step).unwrap_or(Cell { bits: 0, step });
    let m = |dlon, dlat| moved(c, dlon, dlat);
    [
        c,
        m(0, 1),
        m(0, -1),
        m(1, 0),
        m(-1, 0),
        m(1, 1),
        m(-1, 1),
        m(1, -1),
        m(-1, -1),
    ]
}

/// The cell `dlon`, `dlat` cells away, wrapping around at the edges of the
/// range; a coordinate that does not move keeps its bits as they are.
fn moved(c: Cell, dlon: i32, dlat: i32) -> Cell {
    let mask = (1u32 << c.step).wrapping_sub(1);
    let shift = |v: u32, d: i32| {
        if d == 0 {
            v
        } else {
            v.wrapping_add(d as u32) & mask
        }
    };
    let lat = shift(squash(c.bits), dlat);
    let lon = shift(squash(c.bits >> 1), dlon);
    Cell {
        bits: spread(lat) | (spread(lon) << 1),
        step: c.step,
    }
}

/// The number of bits per coordinate whose cells cover `radius` metres
/// around latitude `lat`.
fn estimate_steps(mut radius: f64, lat: f64) -> u32 {
    if radius == 0.0 {
        return STEP_MAX;
    }
    let mut step: i32 = 1;
    while radius < MERCATOR_MAX {
        radius *= 2.0;
        step += 1;
    }
    // Leave room so the radius fits in most cases.
    step -= 2;
    // Cells get narrower towards the poles.
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores redis-server 7.0.15 stored for these positions.
    #[test]
    fn geohash_matches_redis() {
        assert_eq!(geohash(-122.33207, 47.60621), 1558507292839943);
        assert_eq!(geohash(0.0, 0.0), 3377699720527872);
        assert_eq!(geohash(13.361389, 38.115556), 3479099956230698);
        assert_eq!(geohash(180.0, 85.05112878), 13510798882111488);
        assert_eq!(geohash(-180.0, -85.05112878), 0);
    }

    #[test]
    fn spread_and_squash_are_inverse() {
        for v in [0u32, 1, 0x3ff_ffff, 0xdead_beef, u32::MAX] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(squash(spread(v) << 1 >> 1), v);
        }
    }

    /// GEOPOS and GEOHASH of Palermo as redis-server 7.0.15 replies.
    #[test]
    fn decode_and_geohash_string_match_redis() {
        let (lon, lat) = decode_score(3479099956230698.0);
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        assert_eq!(&geohash_string(lon, lat), b"sqc8b49rny0");
    }

    /// GEODIST Palermo Catania: 166274.1516 m in Redis.
    #[test]
    fn distance_matches_redis() {
        let (a, b) = (
            decode_score(3479099956230698.0),
            decode_score(3479447370796909.0),
        );
        let d = distance(a.0, a.1, b.0, b.1);
        assert_eq!((d * 10000.0).round_ties_even(), 1662741516.0);
    }

    #[test]
    fn neighbours_wrap_around() {
        let c = encode(179.9, 0.0, 4).unwrap();
        let east = moved(c, 1, 0);
        assert!(decode(east).lon.min == LON_MIN);
        let west = moved(east, -1, 0);
        assert_eq!(west, c);
    }

    #[test]
    fn steps_shrink_with_the_radius_and_near_the_poles() {
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert!(estimate_steps(100.0, 0.0) > estimate_steps(100_000.0, 0.0));
        assert_eq!(estimate_steps(100.0, 70.0) + 1, estimate_steps(100.0, 0.0));
        assert_eq!(estimate_steps(100.0, -85.0) + 2, estimate_steps(100.0, 0.0));
        assert_eq!(estimate_steps(1e9, 0.0), 1);
    }
}
