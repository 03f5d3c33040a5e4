/* The attention explorer's page logic: plain JavaScript, no dependencies, no build step.
 *
 * It talks to the JSON API of experiments/explorer/app.py:
 *   GET  /api/runs                the runs the server was started with, and their options
 *   POST /api/runs/{id}/answer    one input -> the model's answer and every attention map
 *   POST /api/zoo                 one attention of zoo/ on small matrices typed on the page
 * and draws each attention map on a canvas (tokens on both axes, hover for the exact weight).
 *
 * What the page shows is also kept in window.explorerState, and every heatmap canvas carries
 * the matrix it draws in data attributes (data-weights, data-query-tokens, data-key-tokens and
 * data-cell/data-origin-x/data-origin-y for the cell geometry), so a test can read the numbers
 * a person sees. Weights are printed to 4 decimals, rounded as Python's '{:.4f}' does.
 */
'use strict';

(() => {
  // Same families as explorer.css; the Noto CJK ones draw Chinese tokens where installed.
  const FONT_STACK = 'system-ui, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", ' +
    '"Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK", "WenQuanYi Micro Hei", sans-serif';
  const MEAN = 'mean';  // the head selector's value for the average of the heads
  const SAMPLE_INPUTS = {
    sentiment: 'this great science fiction film is really awesome',
    translation: 'I won!',
    couplet: '春风得意马蹄疾',
    matching: {a: '花呗怎么还款', b: '花呗如何还钱'},
  };
  // matplotlib's "Reds" (the colour map of the command line's --heatmap), as a few stops.
  const REDS = [[255, 245, 240], [254, 224, 210], [252, 187, 161], [252, 146, 114],
    [251, 106, 74], [239, 59, 44], [203, 24, 29], [165, 15, 21], [103, 0, 13]];

  const state = {
    runs: [],
    compare: false,
    panels: [newPanelState(0), newPanelState(1)],
    zoo: {request: null, response: null, shown: null},
  };
  window.explorerState = state;

  function newPanelState(index) {
    return {index, runId: null, request: null, answer: null,
      view: {map: 0, layer: 0, head: MEAN}, shown: null, dom: null};
  }

  // ---------------------------------------------------------------- small helpers

  const $ = (id) => document.getElementById(id);

  /** An element with attributes (strings; `text` sets textContent) and children. */
  function el(tag, attrs = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'text') node.textContent = value;
      else if (key === 'className') node.className = value;
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of [].concat(children)) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  /** x to `digits` decimals as Python's f'{x:.{digits}f}' writes it: exact ties (e.g. 0.03125)
   * go to the even digit, where JavaScript's toFixed rounds them up, and a negative number
   * keeps its sign even when it rounds to zero ('-0.0000'). */
  function pyFixed(x, digits = 4) {
    if (!Number.isFinite(x)) return String(x);
    const magnitude = Math.abs(x);
    let text = magnitude.toFixed(digits);
    const exact = magnitude.toFixed(Math.min(100, digits + 40));  // the exact binary value
    const rest = exact.slice(exact.indexOf('.') + 1 + digits);
    if (/^50*$/.test(rest) && Number(text[text.length - 1]) % 2 === 1) text = oneLess(text);
    return (x < 0 || Object.is(x, -0) ? '-' : '') + text;
  }

  /** '0.0313' -> '0.0312', '3' -> '2': one unit less in the last place of a decimal >= 0. */
  function oneLess(text) {
    const point = text.indexOf('.');
    const scale = point < 0 ? 0 : text.length - point - 1;
    const digits = (BigInt(text.replace('.', '')) - 1n).toString().padStart(scale + 1, '0');
    return scale ? `${digits.slice(0, -scale)}.${digits.slice(-scale)}` : digits;
  }

  /** The colour of weight t in [0, 1] on the Reds ramp, as 'rgb(r, g, b)' (one of 256 shades,
   * made once: a big map draws tens of thousands of cells). */
  function colour(t) {
    const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0));
    return SHADES[Math.round(x * 255)];
  }

  const SHADES = Array.from({length: 256}, (_, n) => {
    const x = (n / 255) * (REDS.length - 1);
    const i = Math.min(REDS.length - 2, Math.floor(x));
    const f = x - i;
    const mix = REDS[i].map((c, k) => Math.round(c + f * (REDS[i + 1][k] - c)));
    return `rgb(${mix[0]}, ${mix[1]}, ${mix[2]})`;
  });

  function download(filename, blob) {
    const url = URL.createObjectURL(blob);
    const link = el('a', {href: url, download: filename});
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  /** A file-name friendly form of a label. */
  function slug(text) {
    return String(text).replace(/[^\w.-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 60) || 'map';
  }

  // ---------------------------------------------------------------- messages and the API

  /** Shows an error in the message area (it stays until dismissed or the next request). */
  function showError(text, kind = 'error') {
    const box = $('messages');
    const close = el('button', {type: 'button', 'aria-label': 'Dismiss', text: '\u00d7'});
    const item = el('div', {className: 'message', 'data-testid': 'message', 'data-kind': kind},
      [el('span', {className: 'text', text}), close]);
    close.addEventListener('click', () => item.remove());
    box.append(item);
  }

  function clearMessages() {
    $('messages').replaceChildren();
  }

  /** fetch() of the JSON API; throws an Error with the server's {"error": ...} message. */
  async function api(path, body) {
    const init = body === undefined ? {} : {
      method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)};
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      throw new Error(`the server did not answer ${path} (${error.message}); is it running?`);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (error) {
      data = null;
    }
    if (!response.ok || data === null || (data && data.error)) {
      const reason = data && data.error ? data.error : `HTTP ${response.status}`;
      throw new Error(reason);
    }
    return data;
  }

  // ---------------------------------------------------------------- tabs

  function selectTab(name) {
    for (const tab of ['runs', 'zoo']) {
      const selected = tab === name;
      $(`tab-${tab}`).setAttribute('aria-selected', String(selected));
      $(`page-${tab}`).hidden = !selected;
    }
    if (name === 'zoo' && state.zoo.response) drawZooHeatmap();
    if (name === 'runs') state.panels.forEach((p) => p.answer && drawPanel(p));
    history.replaceState(null, '', name === 'zoo' ? '#zoo' : '#');
  }

  // ---------------------------------------------------------------- runs, options and input

  function runById(id) {
    return state.runs.find((run) => run.id === id) || null;
  }

  function runLabel(run) {
    return `${run.experiment} \u00b7 ${run.model} \u00b7 step ${run.step} \u00b7 ${run.workdir}`;
  }

  async function loadRuns() {
    let data;
    try {
      data = await api('/api/runs');
    } catch (error) {
      showError(`Could not list the runs: ${error.message}`);
      return;
    }
    state.runs = data.runs || [];
    for (const index of [0, 1]) {
      const select = $(`run-select-${index}`);
      select.replaceChildren(...state.runs.map((run) =>
        el('option', {value: run.id, text: `#${run.id} ${runLabel(run)}`})));
    }
    if (!state.runs.length) {
      showError('The server has no run to explore; the Zoo tab works without one.');
      return;
    }
    $('run-select-1').value = state.runs[Math.min(1, state.runs.length - 1)].id;
    setRun(0, state.runs[0].id);
    setRun(1, $('run-select-1').value);
  }

  /** Makes `id` the run of panel `index`: its options, its input kind, a sample input. */
  function setRun(index, id) {
    const panel = state.panels[index];
    panel.runId = id;
    panel.answer = null;
    panel.shown = null;
    buildOptions(index, runById(id));
    ensurePanels();
    if (panel.dom) renderPanelHead(panel);
    if (index === 0) {
      showInputKind(inputKind());
      fillSampleInput(runById(id));
    }
    checkCompatible();
  }

  /** The input kind of the first run: 'text' or 'pair'. */
  function inputKind() {
    const run = runById(state.panels[0].runId);
    return run && run.input === 'pair' ? 'pair' : 'text';
  }

  function showInputKind(kind) {
    $('input-text-box').hidden = kind === 'pair';
    $('input-pair-box').hidden = kind !== 'pair';
  }

  /** Puts an example input in an empty box (or one still holding another example). */
  function fillSampleInput(run) {
    if (!run || !(run.experiment in SAMPLE_INPUTS)) return;
    const sample = SAMPLE_INPUTS[run.experiment];
    const samples = Object.values(SAMPLE_INPUTS);
    if (typeof sample === 'string') {
      const box = $('input-text');
      if (!box.value.trim() || samples.includes(box.value)) box.value = sample;
    } else {
      const a = $('input-a');
      const b = $('input-b');
      if (!a.value.trim() && !b.value.trim()) {
        a.value = sample.a;
        b.value = sample.b;
      }
    }
  }

  /** In compare mode both runs must read the same kind of input; says so when they do not. */
  function checkCompatible() {
    const other = runById(state.panels[1].runId);
    if (!state.compare || !other) return true;
    const kind = other.input === 'pair' ? 'pair' : 'text';
    $('messages').querySelectorAll('[data-kind=compare]').forEach((item) => item.remove());
    if (kind !== inputKind()) {
      showError(`The second run (#${other.id}, ${other.experiment}) reads a ` +
        `${kind === 'pair' ? 'pair of sentences' : 'text'}, the first one a ` +
        `${inputKind() === 'pair' ? 'pair of sentences' : 'text'}: choose two runs that read ` +
        'the same kind of input to compare them.', 'compare');
      return false;
    }
    return true;
  }

  /** One control per option of the run: a checkbox, a number box or a list. */
  function buildOptions(index, run) {
    const box = $(`options-${index}`);
    const legend = el('legend', {text: run ? `Options of #${run.id} (${run.model})` : 'Options'});
    box.replaceChildren(legend);
    const options = (run && run.options) || {};
    const names = Object.keys(options);
    box.classList.toggle('empty', !names.length);
    if (!names.length) box.append(el('span', {className: 'none', text: 'no options'}));
    for (const name of names) box.append(optionControl(index, name, options[name]));
  }

  function optionControl(index, name, spec) {
    const id = `option-${index}-${name}`;
    const common = {id, 'data-testid': id, 'data-option': name, 'data-type': spec.type};
    const label = name.replace(/_/g, ' ');
    const title = spec.help || undefined;
    if (spec.type === 'bool') {
      const input = el('input', {...common, type: 'checkbox'});
      input.checked = Boolean(spec.default);
      return el('label', {for: id, title}, [input, label]);
    }
    if (spec.type === 'choice') {
      const choices = spec.choices || [];
      const select = el('select', common, choices.map((choice, i) =>
        el('option', {value: String(i), text: String(choice)})));
      select.value = String(Math.max(0, choices.indexOf(spec.default)));
      return el('label', {for: id, title}, [label, select]);
    }
    const input = el('input', {...common, type: 'number', min: spec.min, max: spec.max,
      step: spec.type === 'int' ? 1 : 'any', value: spec.default ?? ''});
    return el('label', {for: id, title}, [label, input]);
  }

  /** The options of panel `index` as the API takes them; throws on a value that is not one. */
  function readOptions(index) {
    const run = runById(state.panels[index].runId);
    const options = {};
    for (const control of $(`options-${index}`).querySelectorAll('[data-option]')) {
      const name = control.dataset.option;
      const spec = run.options[name];
      if (spec.type === 'bool') {
        options[name] = control.checked;
      } else if (spec.type === 'choice') {
        options[name] = spec.choices[Number(control.value)];
      } else if (control.value.trim() === '') {
        continue;  // left empty: the run's default
      } else {
        const value = Number(control.value);
        if (!Number.isFinite(value) || (spec.type === 'int' && !Number.isInteger(value))) {
          throw new Error(`option ${name}: ${JSON.stringify(control.value)} is not ` +
            (spec.type === 'int' ? 'a whole number' : 'a number'));
        }
        options[name] = value;
      }
    }
    return options;
  }

  function readInput() {
    if (inputKind() === 'pair') return {a: $('input-a').value, b: $('input-b').value};
    return $('input-text').value;
  }

  // ---------------------------------------------------------------- asking the runs

  async function answer() {
    clearMessages();
    if (!state.runs.length) {
      showError('There is no run to ask.');
      return;
    }
    if (!checkCompatible()) return;
    const active = state.compare ? [0, 1] : [0];
    const button = $('submit');
    button.disabled = true;
    $('busy').textContent = 'Working\u2026';
    const input = readInput();
    try {
      for (const index of active) {  // one after the other: the server runs one model at a time
        await answerPanel(state.panels[index], input);
      }
    } finally {
      button.disabled = false;
      $('busy').textContent = '';
      document.body.dataset.answered = String(Date.now());
    }
  }

  async function answerPanel(panel, input) {
    const run = runById(panel.runId);
    let request;
    try {
      // float32 bytes: the same values as nested lists in about a quarter of the JSON.
      request = {input, options: readOptions(panel.index), weights_format: 'float32'};
    } catch (error) {
      showError(`#${run.id}: ${error.message}`);
      return;
    }
    const started = performance.now();
    try {
      const response = await api(`/api/runs/${encodeURIComponent(run.id)}/answer`, request);
      for (const map of response.attention || []) map.weights = nestedWeights(map.weights);
      const first = !panel.answer;
      panel.request = request;
      panel.answer = response;
      if (first) panel.view = defaultView(response.attention || []);
      panel.seconds = (performance.now() - started) / 1000;
      keepView(panel);
      renderPanel(panel);
    } catch (error) {
      showError(`#${run.id} (${run.model}): ${error.message}`);
    }
  }

  /** A run's first picture: its cross-attention if it has one (what a seq2seq model is read
   * for), else its first map; the last layer, the average of the heads. */
  function defaultView(maps) {
    const cross = maps.findIndex((map) => map.kind === 'cross');
    const map = Math.max(0, cross);
    return {map, layer: maps[map] ? maps[map].layers - 1 : 0, head: MEAN};
  }

  /** Keeps the chosen map, layer and head across answers where the new answer has them. */
  function keepView(panel) {
    const maps = panel.answer.attention || [];
    const view = panel.view;
    if (view.map >= maps.length) view.map = 0;
    const map = maps[view.map];
    if (!map) return;
    if (view.layer >= map.layers) view.layer = 0;
    if (view.head !== MEAN && view.head >= map.heads) view.head = MEAN;
  }

  // ---------------------------------------------------------------- panels

  function ensurePanels() {
    const box = $('panels');
    const wanted = state.compare ? 2 : 1;
    box.classList.toggle('two', wanted === 2);
    for (const panel of state.panels) {
      if (!panel.dom) panel.dom = createPanelDom(panel);
      const show = panel.index < wanted;
      if (show && !panel.dom.root.isConnected) box.append(panel.dom.root);
      if (!show && panel.dom.root.isConnected) panel.dom.root.remove();
    }
    const empty = [0, 1].map((i) => $(`options-${i}`).classList.contains('empty'));
    $('options-0').hidden = empty[0] && (!state.compare || empty[1]);
    $('options-1').hidden = !state.compare || (empty[0] && empty[1]);
    document.querySelector('.options-grid').classList.toggle('one', !state.compare);
  }

  /** Clones the panel template and names its parts `<role>-<index>` (ids and test ids). */
  function createPanelDom(panel) {
    const root = $('panel-template').content.firstElementChild.cloneNode(true);
    const i = panel.index;
    root.id = `panel-${i}`;
    root.dataset.testid = `panel-${i}`;
    const dom = {root};
    const names = {lines: 'cli-lines', map: 'map-select', layer: 'layer-select',
      head: 'head-select', canvas: 'heatmap', png: 'download-png', json: 'download-json'};
    for (const node of root.querySelectorAll('[data-role]')) {
      const role = node.dataset.role;
      dom[role] = node;
      node.id = `${names[role] || role}-${i}`;
      node.dataset.testid = node.id;
    }
    dom.map.addEventListener('change', () => changeView(panel, {map: Number(dom.map.value)}));
    dom.layer.addEventListener('change', () =>
      changeView(panel, {layer: Number(dom.layer.value)}));
    dom.head.addEventListener('change', () => changeView(panel, {
      head: dom.head.value === MEAN ? MEAN : Number(dom.head.value)}));
    dom.png.addEventListener('click', () => downloadPng(panel));
    dom.json.addEventListener('click', () => downloadJson(panel));
    dom.table.parentElement.addEventListener('toggle', () => renderTable(panel));
    attachHover(dom.canvas, dom.tooltip, dom.readout, () => panel.shown);
    renderPanelHead(panel, dom);
    return dom;
  }

  function renderPanelHead(panel, dom = panel.dom) {
    const run = runById(panel.runId);
    dom.title.textContent = run ? `#${run.id} ${run.experiment}: ${run.model}` : 'No run';
    dom.meta.textContent = run ? `${run.workdir} \u00b7 step ${run.step}` : '';
    if (!panel.answer) {
      dom.answer.hidden = true;
      dom.attention.hidden = true;
    }
  }

  function changeView(panel, change) {
    Object.assign(panel.view, change);
    if ('map' in change) keepView(panel);
    drawPanel(panel);
  }

  function renderPanel(panel) {
    ensurePanels();
    const dom = panel.dom;
    renderPanelHead(panel);
    const output = panel.answer.output || {};
    dom.friendly.replaceChildren(...friendly(panel.answer.experiment, output));
    dom.lines.textContent = (output.lines || []).join('\n');
    const notes = (output.notes || []).join('\n');  // the command's standard error
    dom.notes.textContent = notes;
    dom.notes.hidden = !notes;
    dom['notes-label'].hidden = !notes;
    const seconds = panel.seconds ? ` \u00b7 answered in ${panel.seconds.toFixed(2)} s` : '';
    const run = runById(panel.runId);
    dom.meta.textContent = `${run.workdir} \u00b7 step ${run.step}${seconds}`;
    dom.answer.hidden = false;
    const maps = panel.answer.attention || [];
    dom.attention.hidden = !maps.length;
    dom.map.replaceChildren(...maps.map((map, i) =>
      el('option', {value: i, text: `${map.name} (${map.kind})`})));
    drawPanel(panel);
  }

  /** Fills the layer and head lists of the chosen map and draws it. */
  function drawPanel(panel) {
    const dom = panel.dom;
    const map = (panel.answer.attention || [])[panel.view.map];
    if (!map) return;
    const view = panel.view;
    dom.map.value = String(view.map);
    dom.layer.replaceChildren(...range(map.layers).map((l) =>
      el('option', {value: l, text: `${l + 1} of ${map.layers}`})));
    dom.layer.value = String(view.layer);
    dom.layer.disabled = map.layers < 2;
    dom.head.replaceChildren(el('option', {value: MEAN, text: 'average of heads'}),
      ...range(map.heads).map((h) => el('option', {value: h, text: `${h + 1} of ${map.heads}`})));
    dom.head.value = String(view.head);
    dom.head.disabled = map.heads < 2;
    const matrix = viewMatrix(map, view.layer, view.head);
    const headText = view.head === MEAN ? (map.heads > 1 ? 'average of heads' : 'head 1')
      : `head ${view.head + 1}`;
    panel.shown = {
      run: panel.runId, map: map.name, kind: map.kind, layer: view.layer, head: view.head,
      queryTokens: map.query_tokens, keyTokens: map.key_tokens, matrix,
      title: `${map.name}, layer ${view.layer + 1}, ${headText}`,
    };
    dom['map-note'].textContent = `${count(map.query_tokens.length, 'query', 'queries')} ` +
      `\u00d7 ${count(map.key_tokens.length, 'key')} \u00b7 ${count(map.layers, 'layer')} ` +
      `\u00b7 ${count(map.heads, 'head')} \u00b7 each row sums to 1 \u00b7 hover a cell (or ` +
      'focus the picture and use the arrow keys) for its exact weight';
    drawHeatmap(dom.canvas, panel.shown);
    dom.readout.textContent = '';
    if (dom.table.parentElement.open) renderTable(panel);
  }

  const range = (n) => Array.from({length: n}, (_, i) => i);
  const count = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

  /** A map's weights as nested lists (L, H, Q, K): as sent, or decoded from the compact form
   * {"dtype": "float32", "shape": [L, H, Q, K], "base64": little-endian float32 bytes}, which
   * carries the same float32 values in about a quarter of the JSON. */
  function nestedWeights(weights) {
    if (Array.isArray(weights)) return weights;
    if (!weights || weights.dtype !== 'float32' || !Array.isArray(weights.shape) ||
        typeof weights.base64 !== 'string') {
      throw new Error('the answer holds attention weights in a form this page does not read');
    }
    const binary = atob(weights.base64);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const shape = weights.shape;
    const count = shape.reduce((a, b) => a * b, 1);
    if (bytes.length !== 4 * count) {
      throw new Error(`attention weights: ${bytes.length} bytes for shape ${shape}`);
    }
    const values = littleEndianFloats(bytes, count);
    const width = shape[shape.length - 1];
    let offset = 0;
    const build = (depth) => range(shape[depth]).map(() => {
      if (depth < shape.length - 2) return build(depth + 1);
      offset += width;  // a row: plain numbers (float32 values, exactly)
      return Array.from(values.subarray(offset - width, offset));
    });
    return shape.length < 2 ? Array.from(values) : build(0);
  }

  /** The float32 values of little-endian bytes, whatever the machine's own byte order. */
  function littleEndianFloats(bytes, count) {
    if (new Uint8Array(new Uint16Array([1]).buffer)[0] === 1) return new Float32Array(bytes.buffer);
    const view = new DataView(bytes.buffer);
    return Float32Array.from({length: count}, (_, i) => view.getFloat32(4 * i, true));
  }

  /** The (Q, K) matrix of one layer and head, or the average of the layer's heads. */
  function viewMatrix(map, layer, head) {
    const heads = map.weights[layer];
    if (head !== MEAN) return heads[head];
    return heads[0].map((row, q) => row.map((_, k) => {
      let total = 0;
      for (const h of heads) total += h[q][k];
      return total / heads.length;
    }));
  }

  // ---------------------------------------------------------------- friendly answers

  /** The answer of one experiment as a person reads it (the CLI's lines are shown below it). */
  function friendly(experiment, output) {
    if (experiment === 'sentiment') return friendlySentiment(output);
    if (experiment === 'translation') return friendlyTranslation(output);
    if (experiment === 'couplet') return friendlyCouplet(output);
    if (experiment === 'matching') return friendlyMatching(output);
    return [];
  }

  function verdict(label, detail, tone) {
    return el('p', {className: 'verdict', 'data-testid': 'verdict'}, [
      el('span', {className: `label ${tone}`, text: String(label)}), ` ${detail}`]);
  }

  /** The label, then the words shaded by their attention weight (darkest = largest). */
  function friendlySentiment(output) {
    const words = output.words || [];
    const weights = (output.word_weights || output.weights || []).map(Number);
    const top = Math.max(2 / Math.max(1, weights.length), ...weights);  // as the heatmap's scale
    const text = el('p', {className: 'shaded', 'data-testid': 'shaded-words',
      'aria-label': 'The words shaded by their attention weight'});
    words.forEach((word, i) => {
      const t = weights[i] / top;
      const unknown = output.unknown && output.unknown[i] ? ' (unknown word)' : '';
      text.append(el('span', {className: 'word', title: `${word}: ${pyFixed(weights[i], 4)}` +
        unknown, style: `background:${colour(t * 0.85)};color:${t > 0.6 ? '#fff' : 'inherit'}`,
      'data-weight': weights[i], text: word}), ' ');
    });
    const label = String(output.label);
    const shown = label.charAt(0).toUpperCase() + label.slice(1);
    return [verdict(shown, `with probability ${pyFixed(Number(output.probability), 4)}`,
      label.toLowerCase()), text];
  }

  /** Alternatives of a beam, best first, with their scores (translations, lower lines). */
  function alternatives(items, heading, testid) {
    const rows = items.map((item, i) => el('tr', {className: i ? '' : 'best'}, [
      el('td', {text: String(i + 1)}), el('td', {className: 'text', text: item.text}),
      el('td', {className: 'score', text: pyFixed(Number(item.score), 4)})]));
    const head = el('tr', {}, [el('th', {text: '#'}), el('th', {text: heading}),
      el('th', {text: 'score'})]);
    return el('table', {className: 'beams', 'data-testid': testid}, [head, ...rows]);
  }

  function friendlyTranslation(output) {
    const items = output.translations || [];
    if (!items.length) return [];
    const beam = output.beam_size ? ` (beam ${output.beam_size}` +
      (output.length_penalty !== undefined ? `, length penalty ${output.length_penalty})` : ')')
      : '';
    return [alternatives(items, `translation${beam}`, 'translations')];
  }

  function friendlyCouplet(output) {
    const items = output.results || (output.lower_lines || []).map((text) => ({text, score: NaN}));
    const parts = [];
    if (output.upper) {
      parts.push(el('p', {className: 'upper'}, ['upper line ', el('b', {text: output.upper})]));
    }
    if (items.length) parts.push(alternatives(items, 'lower line', 'lower-lines'));
    return parts;
  }

  /** Label 1 = the two questions mean the same (p(same) >= threshold). */
  function friendlyMatching(output) {
    const same = Number(output.label) === 1;
    const threshold = output.threshold !== undefined ? `, threshold ${output.threshold}` : '';
    return [verdict(same ? 'Same meaning' : 'Different meaning',
      `(label ${output.label}): p(same) = ${pyFixed(Number(output.probability), 4)}${threshold}`,
      same ? 'similar' : 'different')];
  }

  // ---------------------------------------------------------------- heatmap

  /** Draws a (Q, K) weight matrix with the query tokens down the left and the key tokens along
   * the bottom, a title and a colour bar; records the matrix and geometry on the canvas. */
  function drawHeatmap(canvas, shown, options = {}) {
    const {matrix, queryTokens, keyTokens} = shown;
    const ctx = canvas.getContext('2d');
    const font = `12px ${FONT_STACK}`;
    ctx.font = font;
    const labelWidth = (tokens) => Math.min(170, Math.max(16,
      ...tokens.map((t) => ctx.measureText(shorten(t)).width)));
    const left = labelWidth(queryTokens) + 14;
    const top = 30;
    const rightBar = 64;
    const rows = matrix.length;
    const cols = rows ? matrix[0].length : 0;
    const box = canvas.parentElement;
    const available = Math.max(200, (box.clientWidth || 600) - left - rightBar - 4);
    const fit = Math.min(available / Math.max(cols, 1), 560 / Math.max(rows, 1));
    const cell = Math.max(3, Math.min(options.maxCell || 34, Math.floor(fit)));
    // Key labels that all fit their column (one Chinese character, a digit) stay upright.
    const upright = keyTokens.every((t) => ctx.measureText(shorten(t)).width <= cell - 2);
    const bottom = upright ? 22 : labelWidth(keyTokens) + 14;
    ctx.font = `600 13px ${FONT_STACK}`;
    const titleWidth = ctx.measureText(shown.title || '').width + 12;
    ctx.font = font;
    const width = Math.ceil(Math.max(left + cols * cell + rightBar, titleWidth, 320));
    const height = top + rows * cell + bottom;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.ceil(width * dpr);
    canvas.height = Math.ceil(height * dpr);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, width, height);
    // The colour scale runs from 0 to the largest weight, or to twice the uniform weight 2/K
    // when no weight reaches that, so a near-uniform map looks even rather than all dark.
    let peak = 0;
    for (const row of matrix) for (const w of row) peak = Math.max(peak, w);
    const scale = Math.max(peak, cols ? 2 / cols : 0) || 1;

    for (let q = 0; q < rows; q++) {  // the cells
      for (let k = 0; k < cols; k++) {
        ctx.fillStyle = colour(matrix[q][k] / scale);
        ctx.fillRect(left + k * cell, top + q * cell, cell, cell);
      }
    }
    if (cell >= 30) drawCellValues(ctx, matrix, scale, left, top, cell);
    drawLabels(ctx, queryTokens, keyTokens, {left, top, cell, rows, cols, upright}, font);
    drawColourBar(ctx, left + cols * cell + 16, top, Math.max(rows * cell, 60), scale, font);
    ctx.fillStyle = '#1d2330';
    ctx.font = `600 13px ${FONT_STACK}`;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'alphabetic';
    ctx.fillText(shown.title || '', 6, 19);

    shown.layout = {left, top, cell, rows, cols};
    canvas.dataset.weights = JSON.stringify(matrix);
    canvas.dataset.queryTokens = JSON.stringify(queryTokens);
    canvas.dataset.keyTokens = JSON.stringify(keyTokens);
    canvas.dataset.cell = String(cell);
    canvas.dataset.originX = String(left);
    canvas.dataset.originY = String(top);
    canvas.dataset.map = shown.map || '';
    canvas.dataset.layer = String(shown.layer ?? '');
    canvas.dataset.head = String(shown.head ?? '');
    canvas.setAttribute('role', 'img');
    canvas.setAttribute('aria-label', `Heatmap: ${shown.title}; ${rows} queries by ${cols} keys`);
  }

  function shorten(token) {
    const text = String(token);
    return text.length > 24 ? `${text.slice(0, 23)}\u2026` : text;
  }

  function drawCellValues(ctx, matrix, scale, left, top, cell) {
    ctx.font = `10px ${FONT_STACK}`;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    matrix.forEach((row, q) => row.forEach((w, k) => {
      ctx.fillStyle = w / scale > 0.55 ? '#fff' : '#1d2330';
      ctx.fillText(pyFixed(w, 2), left + (k + 0.5) * cell, top + (q + 0.5) * cell);
    }));
  }

  /** Query tokens right-aligned left of the rows, key tokens below the columns (turned to read
   * upwards unless they fit their column); with small cells only every few labels (hover names
   * every cell). */
  function drawLabels(ctx, queryTokens, keyTokens, {left, top, cell, rows, cols, upright}, font) {
    const every = Math.max(1, Math.ceil(13 / cell));
    ctx.font = font;
    ctx.fillStyle = '#1d2330';
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let q = 0; q < rows; q += every) {
      ctx.fillText(shorten(queryTokens[q]), left - 6, top + (q + 0.5) * cell);
    }
    const below = top + rows * cell + 6;
    if (upright) {
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      for (let k = 0; k < cols; k += every) {
        ctx.fillText(shorten(keyTokens[k]), left + (k + 0.5) * cell, below - 2);
      }
      return;
    }
    for (let k = 0; k < cols; k += every) {
      ctx.save();
      ctx.translate(left + (k + 0.5) * cell, below);
      ctx.rotate(-Math.PI / 2);
      ctx.fillText(shorten(keyTokens[k]), 0, 0);
      ctx.restore();
    }
  }

  function drawColourBar(ctx, x, y, height, scale, font) {
    const steps = 64;
    for (let i = 0; i < steps; i++) {
      ctx.fillStyle = colour(1 - i / (steps - 1));
      ctx.fillRect(x, y + (i * height) / steps, 12, height / steps + 1);
    }
    ctx.strokeStyle = '#d8dde6';
    ctx.strokeRect(x + 0.5, y + 0.5, 11, height - 1);
    ctx.font = font;
    ctx.fillStyle = '#5b6475';
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    ctx.fillText(pyFixed(scale, 2), x + 16, y + 6);
    ctx.fillText('0', x + 16, y + height - 6);
  }

  /** The cell (q, k) under a point of the canvas, in CSS pixels, or null. */
  function cellAt(shown, x, y) {
    const {left, top, cell, rows, cols} = shown.layout;
    const k = Math.floor((x - left) / cell);
    const q = Math.floor((y - top) / cell);
    return q >= 0 && q < rows && k >= 0 && k < cols ? {q, k} : null;
  }

  function describeCell(shown, q, k) {
    const row = shown.matrix[q];
    const sum = row.reduce((a, b) => a + b, 0);
    return {
      query: shown.queryTokens[q], key: shown.keyTokens[k], weight: pyFixed(row[k], 4),
      rowSum: pyFixed(sum, 4), q, k};
  }

  /** Hover (and arrow keys on the focused canvas) show query, key and exact weight. */
  function attachHover(canvas, tooltip, readout, getShown) {
    let cursor = null;
    const show = (q, k, px, py) => {
      const shown = getShown();
      const d = describeCell(shown, q, k);
      const text = `query ${q + 1} "${d.query}" \u2192 key ${k + 1} "${d.key}": ${d.weight}`;
      readout.textContent = `${text} (row sum ${d.rowSum})`;
      readout.dataset.weight = d.weight;
      tooltip.replaceChildren(
        el('div', {text: `query: ${d.query}`}), el('div', {text: `key: ${d.key}`}),
        el('div', {}, ['weight: ', el('b', {text: d.weight})]));
      tooltip.dataset.testid = `${canvas.id}-tooltip`;
      tooltip.dataset.weight = d.weight;
      tooltip.hidden = false;
      const box = canvas.parentElement;
      const x = Math.min(px + 14, box.scrollLeft + box.clientWidth - tooltip.offsetWidth - 4);
      tooltip.style.left = `${Math.max(box.scrollLeft, x)}px`;
      tooltip.style.top = `${py + 16}px`;
      cursor = {q, k};
    };
    canvas.addEventListener('mousemove', (event) => {
      const shown = getShown();
      if (!shown || !shown.layout) return;
      const rect = canvas.getBoundingClientRect();
      const found = cellAt(shown, event.clientX - rect.left, event.clientY - rect.top);
      if (!found) {
        tooltip.hidden = true;
        return;
      }
      show(found.q, found.k, event.clientX - rect.left + canvas.offsetLeft,
        event.clientY - rect.top + canvas.offsetTop);
    });
    canvas.addEventListener('mouseleave', () => {
      tooltip.hidden = true;
    });
    canvas.addEventListener('keydown', (event) => {
      const shown = getShown();
      const moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]};
      if (!shown || !shown.layout || !(event.key in moves)) return;
      event.preventDefault();
      const {rows, cols, left, top, cell} = shown.layout;
      const [dq, dk] = moves[event.key];
      const q = cursor ? Math.min(rows - 1, Math.max(0, cursor.q + dq)) : 0;
      const k = cursor ? Math.min(cols - 1, Math.max(0, cursor.k + dk)) : 0;
      show(q, k, left + (k + 0.5) * cell, top + (q + 0.5) * cell);
    });
    canvas.addEventListener('blur', () => {
      tooltip.hidden = true;
    });
  }

  /** The shown matrix as an HTML table (when its <details> is open; large maps are cut). */
  function renderTable(panel) {
    const dom = panel.dom;
    if (!dom.table.parentElement.open || !panel.shown) return;
    dom.table.replaceChildren(matrixTable(panel.shown.matrix, panel.shown.queryTokens,
      panel.shown.keyTokens, {limit: 80, testid: `weights-table-${panel.index}`}));
  }

  /** A table of numbers (4 decimals) with row and column headers; columns from `masked` on are
   * greyed. Cells carry data-q, data-k and data-value (the full number). */
  function matrixTable(matrix, rowNames, colNames, {limit = 1000, masked = Infinity,
    testid} = {}) {
    const rows = Math.min(matrix.length, limit);
    const cols = Math.min(matrix.length ? matrix[0].length : 0, limit);
    const head = el('tr', {}, [el('th', {text: ''}),
      ...range(cols).map((k) => el('th', {scope: 'col', text: shorten(colNames[k])}))]);
    const body = range(rows).map((q) => el('tr', {}, [
      el('th', {scope: 'row', text: shorten(rowNames[q])}),
      ...range(cols).map((k) => el('td', {className: k >= masked ? 'masked' : '',
        'data-q': q, 'data-k': k, 'data-value': matrix[q][k], text: pyFixed(matrix[q][k], 4)}))]));
    const table = el('table', {className: 'matrix', 'data-testid': testid}, [head, ...body]);
    if (rows === matrix.length && cols === (matrix[0] || []).length) return table;
    return el('div', {}, [table, el('p', {className: 'note',
      text: `The first ${rows} \u00d7 ${cols} of the map; download the JSON for all of it.`})]);
  }

  // ---------------------------------------------------------------- downloads

  function downloadPng(panel) {
    if (!panel.shown) return;
    const name = `${slug(panel.shown.map)}-layer${panel.shown.layer + 1}-` +
      `${panel.shown.head === MEAN ? 'mean' : `head${panel.shown.head + 1}`}.png`;
    panel.dom.canvas.toBlob((blob) => blob && download(name, blob), 'image/png');
  }

  function downloadJson(panel) {
    if (!panel.shown) return;
    const run = runById(panel.runId);
    const map = panel.answer.attention[panel.view.map];
    const data = {
      run: {id: run.id, workdir: run.workdir, experiment: run.experiment, model: run.model,
        step: run.step},
      input: panel.request.input, options: panel.request.options,
      output: panel.answer.output,
      shown: {map: map.name, kind: map.kind, layer: panel.shown.layer,
        head: panel.shown.head, query_tokens: map.query_tokens, key_tokens: map.key_tokens,
        weights: panel.shown.matrix},
      map,
    };
    const name = `${slug(map.name)}-weights.json`;
    download(name, new Blob([JSON.stringify(data, null, 1)], {type: 'application/json'}));
  }

  // ---------------------------------------------------------------- zoo page

  /** Rows of numbers from a text box: one row per line, numbers split by spaces or commas
   * (a JSON list of lists works too); throws an Error naming the box, row and entry. */
  function parseMatrix(text, name) {
    const trimmed = text.trim();
    if (!trimmed) throw new Error(`${name}: empty; write one row of numbers per line`);
    let rows;
    if (trimmed.startsWith('[')) {
      try {
        rows = JSON.parse(trimmed);
      } catch (error) {
        throw new Error(`${name}: not a JSON list of rows (${error.message})`);
      }
      if (!Array.isArray(rows) || !rows.every(Array.isArray)) {
        throw new Error(`${name}: expected a list of rows, e.g. [[1, 0], [0, 1]]`);
      }
    } else {
      rows = trimmed.split('\n').filter((line) => line.trim()).map((line) =>
        line.trim().split(/[\s,;]+/).filter(Boolean));
    }
    return rows.map((row, r) => row.map((entry, c) => {
      const value = Number(entry);
      if (typeof entry === 'boolean' || entry === '' || !Number.isFinite(value)) {
        throw new Error(`${name}, row ${r + 1}, entry ${c + 1}: ${JSON.stringify(entry)} is ` +
          'not a number');
      }
      return value;
    })).map((row, r, all) => {
      if (row.length !== all[0].length) {
        throw new Error(`${name}: row ${r + 1} has ${row.length} numbers, row 1 has ` +
          `${all[0].length}`);
      }
      return row;
    });
  }

  async function runZoo() {
    clearMessages();
    let request;
    try {
      request = {
        score: $('zoo-score').value,
        queries: parseMatrix($('zoo-queries').value, 'queries'),
        keys: parseMatrix($('zoo-keys').value, 'keys'),
        values: parseMatrix($('zoo-values').value, 'values'),
        valid_len: wholeNumber($('zoo-valid-len').value, 'valid length'),
        seed: wholeNumber($('zoo-seed').value, 'seed'),
      };
    } catch (error) {
      showError(error.message);
      return;
    }
    const button = $('zoo-run');
    button.disabled = true;
    $('zoo-busy').textContent = 'Working\u2026';
    try {
      state.zoo.response = await api('/api/zoo', request);
      state.zoo.request = request;
      renderZoo();
    } catch (error) {
      showError(`Zoo: ${error.message}`);
    } finally {
      button.disabled = false;
      $('zoo-busy').textContent = '';
      document.body.dataset.zooAnswered = String(Date.now());
    }
  }

  function wholeNumber(text, name) {
    const value = Number(text);
    if (text.trim() === '' || !Number.isInteger(value) || value < 0) {
      throw new Error(`${name}: ${JSON.stringify(text)} is not a whole number >= 0`);
    }
    return value;
  }

  function renderZoo() {
    const {request, response} = state.zoo;
    const queries = request.queries.map((_, q) => `q${q + 1}`);
    const keys = request.keys.map((_, k) => `k${k + 1}`);
    const dims = (response.output[0] || []).map((_, d) => `d${d + 1}`);
    $('zoo-scores').replaceChildren(matrixTable(response.scores, queries, keys,
      {masked: request.valid_len, testid: 'zoo-scores-table'}));
    $('zoo-weights').replaceChildren(matrixTable(response.weights, queries, keys,
      {masked: request.valid_len, testid: 'zoo-weights-table'}));
    $('zoo-output').replaceChildren(matrixTable(response.output, queries, dims,
      {testid: 'zoo-output-table'}));
    $('zoo-results').hidden = false;
    drawZooHeatmap();
  }

  function drawZooHeatmap() {
    const {request, response} = state.zoo;
    state.zoo.shown = {
      map: `zoo ${request.score}`, layer: 0, head: 0, matrix: response.weights,
      queryTokens: request.queries.map((_, q) => `q${q + 1}`),
      keyTokens: request.keys.map((_, k) => `k${k + 1}`),
      title: `${request.score}, valid length ${request.valid_len}`,
    };
    drawHeatmap($('zoo-heatmap'), state.zoo.shown, {maxCell: 44});
  }

  // ---------------------------------------------------------------- start

  function submitOnCtrlEnter(event) {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      event.target.form.requestSubmit();
    }
  }

  function start() {
    $('tab-runs').addEventListener('click', () => selectTab('runs'));
    $('tab-zoo').addEventListener('click', () => selectTab('zoo'));
    $('ask').addEventListener('submit', (event) => {
      event.preventDefault();
      answer();
    });
    $('zoo-form').addEventListener('submit', (event) => {
      event.preventDefault();
      runZoo();
    });
    for (const id of ['input-text', 'input-a', 'input-b', 'zoo-queries', 'zoo-keys',
      'zoo-values']) {
      $(id).addEventListener('keydown', submitOnCtrlEnter);
    }
    $('run-select-0').addEventListener('change', (event) => setRun(0, event.target.value));
    $('run-select-1').addEventListener('change', (event) => setRun(1, event.target.value));
    $('compare-toggle').addEventListener('change', (event) => {
      state.compare = event.target.checked;
      $('run-select-1').disabled = !state.compare;
      ensurePanels();
      checkCompatible();
    });
    const zooHover = $('zoo-heatmap');
    attachHover(zooHover, zooHover.nextElementSibling, $('zoo-readout'), () => state.zoo.shown);
    let resizeTimer = null;
    window.addEventListener('resize', () => {  // refit the heatmaps to the new width
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        state.panels.forEach((p) => p.answer && p.dom && p.dom.root.isConnected && drawPanel(p));
        if (state.zoo.response && !$('page-zoo').hidden) drawZooHeatmap();
      }, 150);
    });
    ensurePanels();
    if (location.hash === '#zoo') selectTab('zoo');
    loadRuns().finally(() => {
      document.body.dataset.ready = 'true';
    });
  }

  window.addEventListener('error', (event) => showError(`Page error: ${event.message}`));
  window.addEventListener('unhandledrejection', (event) =>
    showError(`Page error: ${event.reason && event.reason.message || event.reason}`));
  document.addEventListener('DOMContentLoaded', start);
})();
