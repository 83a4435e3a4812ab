// Injected into a copy of a report by scripts/html-check.sh: looks at the
// page as a person would, in the browser's own layout, and writes what is
// wrong (or "ok") into <pre id="html-check"> for --dump-dom to show.
// - no text cut by the edge of its chart;
// - no two labels of a chart on top of each other (point labels drawn at
//   -30 degrees are compared in a frame turned +30, where they are upright);
// - the page no wider than the window.
(function () {
  var out = [];
  var c = Math.cos(Math.PI / 6), s = Math.sin(Math.PI / 6);
  function turned(x, y) { return [x * c - y * s, x * s + y * c]; }
  function hit(a, b) {
    var e = 0.5;
    return !(a[2] - e <= b[0] + e || b[2] - e <= a[0] + e || a[3] - e <= b[1] + e || b[3] - e <= a[1] + e);
  }
  function aabb(pts) {
    var xs = pts.map(function (p) { return p[0]; }), ys = pts.map(function (p) { return p[1]; });
    return [Math.min.apply(null, xs), Math.min.apply(null, ys), Math.max.apply(null, xs), Math.max.apply(null, ys)];
  }
  var svgs = document.querySelectorAll('svg');
  for (var i = 0; i < svgs.length; i++) {
    var svg = svgs[i];
    var name = svg.getAttribute('aria-label') || ('chart ' + i);
    var sr = svg.getBoundingClientRect();
    var rot = [], up = [];
    var texts = svg.querySelectorAll('text');
    for (var k = 0; k < texts.length; k++) {
      var t = texts[k];
      var r = t.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.left < sr.left - 0.5 || r.right > sr.right + 0.5 || r.top < sr.top - 0.5 || r.bottom > sr.bottom + 0.5) {
        out.push('clipped in "' + name + '": "' + t.textContent + '"');
      }
      var tf = t.getAttribute('transform') || '';
      var b = t.getBBox();
      var corners = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]];
      if (tf.indexOf('rotate(-30') === 0) {
        var ax = +t.getAttribute('x'), ay = +t.getAttribute('y');
        var a = turned(ax, ay);
        rot.push({ text: t.textContent, box: [b.x + a[0] - ax, b.y + a[1] - ay, b.x + b.width + a[0] - ax, b.y + b.height + a[1] - ay] });
      } else if (tf === '') {
        up.push({ text: t.textContent, plain: [b.x, b.y, b.x + b.width, b.y + b.height], box: aabb(corners.map(function (p) { return turned(p[0], p[1]); })) });
      }
    }
    for (var p = 0; p < rot.length; p++) {
      for (var q = 0; q < p; q++) {
        if (hit(rot[p].box, rot[q].box)) out.push('overlap in "' + name + '": "' + rot[p].text + '" and "' + rot[q].text + '"');
      }
      for (var u = 0; u < up.length; u++) {
        if (hit(rot[p].box, up[u].box)) out.push('overlap in "' + name + '": "' + rot[p].text + '" and "' + up[u].text + '"');
      }
    }
    for (var m = 0; m < up.length; m++) {
      for (var n = 0; n < m; n++) {
        if (hit(up[m].plain, up[n].plain)) out.push('overlap in "' + name + '": "' + up[m].text + '" and "' + up[n].text + '"');
      }
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    out.push('the page is ' + document.documentElement.scrollWidth + ' px wide in a ' + window.innerWidth + ' px window');
  }
  var pre = document.createElement('pre');
  pre.id = 'html-check';
  // The markers are joined here so that the script's own text never reads as a result.
  var mark = ['RESULT', 'OF', 'HTML', 'CHECK'].join('_');
  pre.textContent = mark + ': ' + (out.length ? 'PROBLEMS\n' + out.join('\n') : 'OK') + ' :' + mark;
  document.body.appendChild(pre);
})();
