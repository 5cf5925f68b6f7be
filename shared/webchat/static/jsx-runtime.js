// react/jsx-runtime for the UMD build of @botpress/webchat (global
// ReactJsxRuntime): React 18's UMD build has no jsx runtime, and jsx(type,
// props, key) is createElement(type, props with key).
(function () {
  'use strict'
  var React = window.React
  function jsx(type, props, key) {
    var p = {}
    for (var k in props) if (Object.prototype.hasOwnProperty.call(props, k)) p[k] = props[k]
    if (key !== undefined) p.key = key
    return React.createElement(type, p)
  }
  window.ReactJsxRuntime = { jsx: jsx, jsxs: jsx, Fragment: React.Fragment }
  // The UMD build reads process.env.NODE_ENV (a bundler would have
  // replaced it).
  if (typeof window.process === 'undefined') window.process = { env: { NODE_ENV: 'production' } }
})()
