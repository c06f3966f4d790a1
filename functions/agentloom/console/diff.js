// A line diff of two JSON values: pretty-printed with sorted keys, then the longest
// common subsequence of their lines. Each line is [sign, text]: "+" added, "−" removed,
// " " kept (the sign is the cue, colour only the second one).

export function sortedJson(value) {
  const sort = (v) => {
    if (Array.isArray(v)) return v.map(sort);
    if (v && typeof v === "object") {
      return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort(v[k])]));
    }
    return v;
  };
  return JSON.stringify(sort(value), null, 2);
}

export function lineDiff(before, after) {
  const a = before.split("\n");
  const b = after.split("\n");
  const n = a.length;
  const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([" ", a[i]]); i += 1; j += 1; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) { out.push(["−", a[i]]); i += 1; }
    else { out.push(["+", b[j]]); j += 1; }
  }
  for (; i < n; i += 1) out.push(["−", a[i]]);
  for (; j < m; j += 1) out.push(["+", b[j]]);
  return out;
}

export function jsonDiff(before, after) {
  return lineDiff(sortedJson(before), sortedJson(after));
}
