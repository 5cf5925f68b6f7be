// The hosted webchat page: the official @botpress/webchat component,
// connected to the installation named by the page's data attributes
// (clientId = the webhook id, apiUrl = <public base>/webhooks). No font is
// configured: the component would fetch it from Google.
//
// The page is what the package's <Webchat> renders (a WebchatProvider
// around its Chat), written out here so that the page can handle the
// signals of the bot's actions, which the component only hands to its
// emitter: webchatVisibility (showWebchat / hideWebchat / toggleWebchat:
// the chat is shown or hidden, a button opens it again), webchatConfig
// (configWebchat: merged into the configuration) and customEvent
// (customEvent). Each is also dispatched on window as `webchat:<name>`
// (detail: its data) for the page's own scripts, and posted to the page
// that embeds this one in an iframe ({type: 'webchat:<name>', data}).
(function () {
  'use strict'
  var React = window.React
  var W = window.Webchat
  var h = React.createElement
  var el = document.getElementById('webchat')
  var d = el.dataset
  var storageKey = 'bp-webchat-' + d.clientId
  var initialConfiguration = { botName: d.botName || 'Bot', allowFileUpload: true }

  function tell(name, data) {
    window.dispatchEvent(new CustomEvent('webchat:' + name, { detail: data }))
    if (window.parent !== window) window.parent.postMessage({ type: 'webchat:' + name, data: data }, '*')
  }

  // Chat is the package's own inner component of <Webchat> (its Chat with
  // the provider's conversation, user and sound), with the configuration
  // the page holds.
  function Chat(props) {
    var conv = W.useActiveConversation()
    var convs = W.useConversations()
    var user = W.useUser()
    var useSound = W.getUseChatSoundStore(storageKey)
    var soundOn = useSound(function (s) { return s.soundOn })
    var toggleSound = useSound(function (s) { return s.toggleSound })
    return h(W.Chat, {
      configuration: props.configuration,
      user: user.userCredentials,
      isLoading: conv.status === 'connecting',
      isTyping: conv.isTyping,
      connected: conv.status === 'connected' ? true : conv.status === 'disconnected' ? false : undefined,
      messages: conv.messages,
      sendMessage: conv.sendMessage,
      uploadFile: conv.uploadFile,
      addMessageFeedback: conv.saveMessageFeedback,
      listConversations: convs.listConversations,
      restartConversation: convs.openConversation,
      participants: conv.participants,
      error: conv.error,
      clientId: d.clientId,
      soundOn: soundOn,
      toggleSound: toggleSound,
      disableSendButton: conv.isAwaitingResponse,
      conversationId: conv.conversationId,
      storageKey: storageKey,
    })
  }

  // Page follows the bot's signals.
  function Page() {
    var emitter = W.useWebchatContext().emitter
    var vis = React.useState(true)
    var conf = React.useState(initialConfiguration)
    var visible = vis[0]
    var setVisible = vis[1]
    var setConfiguration = conf[1]
    React.useEffect(function () {
      var offs = [
        emitter.on('webchatVisibility', function (v) {
          setVisible(function (cur) { return v === 'show' ? true : v === 'hide' ? false : v === 'toggle' ? !cur : cur })
          tell('webchatVisibility', v)
        }),
        emitter.on('webchatConfig', function (c) {
          if (c && typeof c === 'object' && !Array.isArray(c)) {
            setConfiguration(function (cur) { return Object.assign({}, cur, c) })
          }
          tell('webchatConfig', c)
        }),
        emitter.on('customEvent', function (e) { tell('customEvent', e) }),
      ]
      return function () { offs.forEach(function (off) { off() }) }
    }, [emitter])
    React.useEffect(function () {
      document.documentElement.setAttribute('data-webchat-visibility', visible ? 'visible' : 'hidden')
    }, [visible])
    return h(React.Fragment, null,
      h('div', { className: 'page-chat', hidden: !visible }, h(Chat, { configuration: conf[0] })),
      visible ? null : h('button', { type: 'button', className: 'page-open', onClick: function () { setVisible(true) } }, 'Open the chat')
    )
  }

  window.ReactDOM.createRoot(el).render(
    h(W.WebchatProvider, { clientId: d.clientId, apiUrl: d.apiUrl, storageKey: storageKey }, h(Page))
  )
})()
