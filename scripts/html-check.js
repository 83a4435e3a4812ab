// Injected into a copy of a report by scripts/html-check.sh: looks at the
// page as a person would, in the browser's own layout, and writes what is
// wrong (or "ok") into <pre id="html-check"> for --dump-dom to show.
// - no text cut by the edge of its chart;
// - no two labels of a chart on top of each other (point labels drawn at
//   -30 degrees are compared in a frame turned +30, where they are upright);
// - no point label across a line, a point or a marker line of its chart;
// - the page no wider than the window.
(function () {
  var out = [];
  var c = Math.cos(Math.PI / 6), s = Math.sin(Math.PI / 6);
  function turned(x, y) { return [x * c - y * s, x * s + y * c]; }
  function hit(a, b) {
    var e = 0.5;
    return !(a[2] - e <= b[0] + e || b[2] - e <= a[0] + e || a[3] - e <= b[1] + e || b[3] - e <= a[1] + e);
  }
  // Liang-Barsky: does the segment a-b touch the box [l, t, r, b]?
  function segHits(a, b, box) {
    var dx = b[0] - a[0], dy = b[1] - a[1], t0 = 0, t1 = 1;
    var pq = [[-dx, a[0] - box[0]], [dx, box[2] - a[0]], [-dy, a[1] - box[1]], [dy, box[3] - a[1]]];
    for (var i = 0; i < 4; i++) {
      var p = pq[i][0], q = pq[i][1];
      if (p === 0) { if (q < 0) return false; continue; }
      var t = q / p;
      if (p < 0) t0 = Math.max(t0, t); else t1 = Math.min(t1, t);
      if (t0 > t1) return false;
    }
    return true;
  }
  // The segments labels must keep off: series lines, point marks (their
  // diagonals), dashed marker lines; in the chart's own coordinates.
  function obstacles(svg) {
    var segs = [];
    var lines = svg.querySelectorAll('polyline');
    for (var i = 0; i < lines.length; i++) {
      var pts = lines[i].getAttribute('points').trim().split(/\s+/).map(function (p) { return p.split(',').map(Number); });
      for (var j = 1; j < pts.length; j++) segs.push({ what: 'a line', a: pts[j - 1], b: pts[j] });
    }
    var dots = svg.querySelectorAll('circle');
    for (var d = 0; d < dots.length; d++) {
      var x = +dots[d].getAttribute('cx'), y = +dots[d].getAttribute('cy'), r = +dots[d].getAttribute('r');
      segs.push({ what: 'a point', a: [x - r, y - r], b: [x + r, y + r] });
      segs.push({ what: 'a point', a: [x - r, y + r], b: [x + r, y - r] });
    }
    var rects = svg.querySelectorAll('rect[stroke]');
    for (var m = 0; m < rects.length; m++) {
      var rx = +rects[m].getAttribute('x'), ry = +rects[m].getAttribute('y');
      var rw = +rects[m].getAttribute('width'), rh = +rects[m].getAttribute('height');
      segs.push({ what: 'a point', a: [rx, ry], b: [rx + rw, ry + rh] });
      segs.push({ what: 'a point', a: [rx, ry + rh], b: [rx + rw, ry] });
    }
    var marks = svg.querySelectorAll('line[stroke-dasharray]');
    for (var k = 0; k < marks.length; k++) {
      var l = marks[k];
      segs.push({ what: 'a marker line', a: [+l.getAttribute('x1'), +l.getAttribute('y1')], b: [+l.getAttribute('x2'), +l.getAttribute('y2')] });
    }
    return segs;
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
      if (tf.indexOf('rotate(-30') === 0) {
        var ax = +t.getAttribute('x'), ay = +t.getAttribute('y');
        var a = turned(ax, ay);
        rot.push({ text: t.textContent, box: [b.x + a[0] - ax, b.y + a[1] - ay, b.x + b.width + a[0] - ax, b.y + b.height + a[1] - ay] });
      } else if (tf === '') {
        up.push({ text: t.textContent, plain: [b.x, b.y, b.x + b.width, b.y + b.height] });
      }
    }
    var segs = obstacles(svg);
    for (var p = 0; p < rot.length; p++) {
      for (var g = 0; g < segs.length; g++) {
        if (segHits(turned(segs[g].a[0], segs[g].a[1]), turned(segs[g].b[0], segs[g].b[1]), rot[p].box)) {
          out.push('label on ' + segs[g].what + ' in "' + name + '": "' + rot[p].text + '"');
          break;
        }
      }
      for (var q = 0; q < p; q++) {
        if (hit(rot[p].box, rot[q].box)) out.push('overlap in "' + name + '": "' + rot[p].text + '" and "' + rot[q].text + '"');
      }
      for (var u = 0; u < up.length; u++) {
        // The upright text's edges, turned: exact where a box around the
        // turned text would take in empty corners.
        var pl = up[u].plain;
        var cs = [[pl[0], pl[1]], [pl[2], pl[1]], [pl[2], pl[3]], [pl[0], pl[3]]].map(function (c) { return turned(c[0], c[1]); });
        var on = false;
        for (var e = 0; e < 4; e++) {
          if (segHits(cs[e], cs[(e + 1) % 4], rot[p].box)) on = true;
        }
        if (on) out.push('overlap in "' + name + '": "' + rot[p].text + '" and "' + up[u].text + '"');
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
