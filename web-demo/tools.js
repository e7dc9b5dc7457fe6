// The demo page's own tools (their definitions: tools.json, which the browser test's native
// fixture reads too): what a reply that calls one gets back, computed in the page.

export const DEMO_TOOLS = await (await fetch(new URL('tools.json', import.meta.url))).json();

/// Runs tool `name` with `args` (the call's arguments as JSON text); the result as text, an
/// error included (the model reads it as the tool's answer).
export function runTool(name, args) {
  let parsed;
  try {
    parsed = JSON.parse(args || '{}');
  } catch (e) {
    return `error: the arguments are not JSON (${e.message})`;
  }
  switch (name) {
    case 'calculator':
      try {
        return String(calculate(String(parsed.expression ?? '')));
      } catch (e) {
        return `error: ${e.message}`;
      }
    case 'current_time':
      return new Date().toString();
    default:
      return `error: no tool named ${name}`;
  }
}

/// Arithmetic without `eval`: numbers, + - * / ^ (right-associative), unary minus, parentheses.
export function calculate(text) {
  const tokens = text.match(/\d+(?:\.\d+)?(?:e[+-]?\d+)?|[-+*/^()]|\S/gi) ?? [];
  let at = 0;
  const peek = () => tokens[at];
  const take = (t) => {
    if (tokens[at] !== t) throw new Error(`expected "${t}", found ${tokens[at] === undefined ? 'the end' : `"${tokens[at]}"`} in "${text}"`);
    at++;
  };
  const atom = () => {
    const t = tokens[at++];
    if (t === '(') {
      const v = sum();
      take(')');
      return v;
    }
    if (t === '-') return -power();
    if (t !== undefined && /^\d/.test(t)) return Number(t);
    throw new Error(`unexpected ${t === undefined ? 'end' : `"${t}"`} in "${text}"`);
  };
  const power = () => {
    const base = atom();
    if (peek() !== '^') return base;
    at++;
    return base ** power();
  };
  const product = () => {
    let v = power();
    while (peek() === '*' || peek() === '/') v = tokens[at++] === '*' ? v * power() : v / power();
    return v;
  };
  const sum = () => {
    let v = product();
    while (peek() === '+' || peek() === '-') v = tokens[at++] === '+' ? v + product() : v - product();
    return v;
  };
  const v = sum();
  if (at !== tokens.length) throw new Error(`unexpected "${tokens[at]}" in "${text}"`);
  return v;
}
