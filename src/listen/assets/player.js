// The listen page's player: plays the stream (HLS through hls.js where the browser has no native HLS, else the
// Icecast MP3), and shows what plays now, the listener count, recent tracks and (when the owner shows it) the time
// left from the page's public JSON. Without it the page is the audio element with the stream and native controls.
(function () {
  'use strict';
  var body = document.body;
  var stateUrl = body.getAttribute('data-state');
  var hlsScript = body.getAttribute('data-hls-script');
  var pollMs = Number(body.getAttribute('data-poll-ms')) || 3000;
  var audio = document.getElementById('player');
  var button = document.getElementById('play');
  var el = function (id) {
    return document.getElementById(id);
  };
  var state = null;
  var source = null; // the address being played
  var hls = null;
  var remaining = null;
  var remainingAt = 0;
  var wantPlaying = false; // the listener pressed play (or the page autoplays) and has not paused since

  function text(id, value) {
    var node = el(id);
    if (node && node.textContent !== value) node.textContent = value;
  }

  function duration(seconds) {
    if (seconds === null) return 'no end set';
    if (seconds <= 0) return 'ending now';
    var h = Math.floor(seconds / 3600);
    var m = Math.floor((seconds % 3600) / 60);
    var s = Math.floor(seconds % 60);
    var two = function (n) {
      return (n < 10 ? '0' : '') + n;
    };
    return (h > 0 ? h + ':' + two(m) : String(m)) + ':' + two(s) + ' left';
  }

  function showTimeLeft() {
    if (!state || !state.show_time_left) return;
    if (remaining === null) return text('time-left', duration(null));
    text('time-left', duration(Math.max(0, remaining - Math.floor((Date.now() - remainingAt) / 1000))));
  }

  // hls.js wherever Media Source Extensions exist: Chromium's own HLS refuses segments from another origin than the
  // playlist's, and segments come from the segment server (another port, or a CDN). Native where there is no MSE (iOS).
  function nativeHls() {
    return !window.MediaSource && audio.canPlayType('application/vnd.apple.mpegurl') !== '';
  }

  function loadHlsJs(then) {
    if (window.Hls) return then();
    var script = document.createElement('script');
    script.src = hlsScript;
    script.onload = then;
    script.onerror = function () {
      playMp3();
    };
    document.head.appendChild(script);
  }

  function playMp3() {
    if (hls) {
      hls.destroy();
      hls = null;
    }
    source = state.stream_url;
    audio.src = source;
    body.setAttribute('data-protocol', 'icecast');
  }

  function attachHls(url) {
    if (!(window.Hls && window.Hls.isSupported())) return playMp3();
    if (hls) hls.destroy();
    hls = new window.Hls({ liveDurationInfinity: true });
    hls.on(window.Hls.Events.ERROR, function (_event, data) {
      if (data && data.fatal) playMp3();
    });
    hls.loadSource(url);
    hls.attachMedia(audio);
    body.setAttribute('data-protocol', 'hls');
    // hls.js arrived after the click's play(), which had no source yet: play now that there is one.
    if (wantPlaying) {
      var started = audio.play();
      if (started && started.catch) started.catch(function () {});
    }
  }

  // Chooses what to play: HLS when offered (natively, else with hls.js), else the MP3 stream.
  function choose() {
    var wanted = state.hls_url || state.stream_url;
    if (wanted === source) return;
    if (!state.hls_url) return playMp3();
    source = state.hls_url;
    if (nativeHls()) {
      audio.src = source;
      body.setAttribute('data-protocol', 'hls');
    } else {
      loadHlsJs(function () {
        attachHls(state.hls_url);
      });
    }
  }

  function play() {
    if (!state) return;
    wantPlaying = true;
    choose();
    var started = audio.play();
    if (started && started.catch)
      started.catch(function () {
        /* autoplay refused: the button stays */
      });
  }

  function showHistory(tracks) {
    var list = el('history');
    if (!list) return;
    var section = el('recent');
    var lines = tracks.slice(1).map(function (t) {
      return (t.artist ? t.artist + ' \u2013 ' : '') + t.title;
    });
    if (list.getAttribute('data-shown') === lines.join('\n')) return;
    list.setAttribute('data-shown', lines.join('\n'));
    if (section) section.hidden = lines.length === 0;
    list.textContent = '';
    lines.forEach(function (line) {
      var item = document.createElement('li');
      item.textContent = line;
      list.appendChild(item);
    });
  }

  function render(next) {
    state = next;
    var track = next.now_playing;
    text('station', next.station_name);
    var description = el('description');
    if (description && next.description) text('description', next.description);
    var art = el('art');
    var picture = art && ((track && track.artwork_url) || next.artwork_url || art.getAttribute('data-fallback'));
    if (picture && art.getAttribute('src') !== picture) art.setAttribute('src', picture);
    var timeLeft = el('time-left');
    if (timeLeft) timeLeft.hidden = !next.show_time_left;
    text('title', track ? track.title : 'Nothing announced yet');
    text('artist', track && track.artist ? track.artist : '');
    text('listeners', next.listeners.current + (next.listeners.current === 1 ? ' listener' : ' listeners'));
    text('on-air', next.on_air ? 'On air' : 'Waiting for the broadcast to start');
    showHistory(next.history);
    remaining = next.remaining_seconds;
    remainingAt = Date.now();
    showTimeLeft();
    if (!audio.paused) choose();
  }

  function ended(message) {
    state = null;
    if (hls) {
      hls.destroy();
      hls = null;
    }
    audio.pause();
    audio.removeAttribute('src');
    body.setAttribute('data-ended', 'true');
    text('on-air', message);
    text('time-left', '');
    button.disabled = true;
  }

  function poll() {
    fetch(stateUrl, { cache: 'no-store' })
      .then(function (response) {
        if (response.status === 404 || response.status === 410) {
          return response.json().then(function (doc) {
            ended(doc.error ? doc.error.message : 'This stream has ended.');
            return false;
          });
        }
        if (!response.ok) return true;
        return response.json().then(function (doc) {
          render(doc.listen);
          return true;
        });
      })
      .catch(function () {
        return true;
      })
      .then(function (again) {
        if (again) setTimeout(poll, pollMs);
      });
  }

  // One control: the button replaces the native audio bar that the page shows without script.
  audio.removeAttribute('controls');
  button.hidden = false;
  button.addEventListener('click', function () {
    if (audio.paused) play();
    else {
      wantPlaying = false;
      audio.pause();
    }
  });
  audio.addEventListener('play', function () {
    button.textContent = 'Pause';
  });
  audio.addEventListener('pause', function () {
    button.textContent = 'Play';
  });
  // A live stream that drops (the source reconnects) is picked up again.
  audio.addEventListener('error', function () {
    if (!state || !wantPlaying) return;
    source = null;
    setTimeout(play, 2000);
  });
  setInterval(showTimeLeft, 1000);
  try {
    render(JSON.parse(el('initial-state').textContent));
  } catch (e) {
    /* the first poll renders */
  }
  setTimeout(poll, pollMs);
  if (body.getAttribute('data-autoplay') === 'true') play();
})();
