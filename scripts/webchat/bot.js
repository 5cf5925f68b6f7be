// bot.js: the webchat browser test's bot, a plain-JavaScript bot on the
// official SDK (@botpress/sdk 7.2.4, loaded as the conformance suite's bot
// loads it: scripts/conformance/fixtures/sdk-shim.js). Run:
//   PORT=8075 BP_API_URL=http://127.0.0.1:8080 BP_TOKEN=<PAT> node bot.js
// It echoes text messages, as the conformance bot does, except the
// commands of the test, which call the webchat integration's actions as a
// bot written for Botpress's webchat does:
//   "webchat:<action> [JSON]"  client.callAction({type: 'webchat:<action>',
//                              input: {conversationId, config|event: JSON}})
//   "webchat:getUserData"      answers "userData: <JSON>" (the user's).
const path = require('node:path')
const sdk = require(path.join(__dirname, '../conformance/fixtures/sdk-shim.js'))

const alias = process.env.WEBCHAT_ALIAS || 'webchat'
const bot = new sdk.Bot({ actions: {}, plugins: {} })

bot.on.message('*', async ({ message, client, ctx }) => {
  const reply = (text) => client.createMessage({ conversationId: message.conversationId, userId: ctx.botId, tags: {}, type: 'text', payload: { text } })
  const text = message.payload.text
  const m = typeof text === 'string' && /^webchat:(\w+)\s*(.*)$/s.exec(text)
  if (!m) return reply(`echo: ${text}`)
  const [, action, arg] = m
  const input = { conversationId: message.conversationId }
  if (action === 'configWebchat') input.config = arg
  if (action === 'customEvent') input.event = arg
  if (action === 'getUserData') {
    const { output } = await client.callAction({ type: `${alias}:getUserData`, input: { userId: message.userId } })
    return reply(`userData: ${JSON.stringify(output.userData)}`)
  }
  await client.callAction({ type: `${alias}:${action}`, input })
  return reply(`done: ${action}`)
})

bot.start(Number(process.env.PORT ?? 8075))
