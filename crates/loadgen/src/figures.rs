//! Figures as the reports print them.

/// `v` with `digits` decimals and thousands separators; "–" for none.
pub fn fmt(v: Option<f64>, digits: usize) -> String {
    let Some(v) = v else {
        return "–".to_string();
    };
    let s = format!("{:.*}", digits, v.abs());
    let (int, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    if v.is_sign_negative() && s.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        out.push('-');
    }
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}
