// The hosted webchat page: the official @botpress/webchat component,
// connected to the installation named by the page's data attributes
// (clientId = the webhook id, apiUrl = <public base>/webhooks). No font is
// configured: the component would fetch it from Google.
(function () {
  'use strict'
  var el = document.getElementById('webchat')
  var d = el.dataset
  var root = window.ReactDOM.createRoot(el)
  root.render(
    window.React.createElement(window.Webchat.Webchat, {
      clientId: d.clientId,
      apiUrl: d.apiUrl,
      storageKey: 'bp-webchat-' + d.clientId,
      configuration: { botName: d.botName || 'Bot', allowFileUpload: true },
    })
  )
})()
