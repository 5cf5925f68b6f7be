// sdk-bot.cjs: a plain-JavaScript bot on the official SDK (@botpress/sdk
// 7.2.4, no CLI codegen: plugins: {} is then required), bundled with
// esbuild into one CommonJS file and deployed as the bot's code by
// llm.test.mjs. Its message handler asks the LLM the SDK way, through the
// llm built-in integration installed as "openai" (callAction
// openai:generateContent), and replies with the model's text.
//
// The npm registry here lacks @botpress/client 2.5.0, which the SDK pins;
// package.json overrides it with 1.45.0, whose retry helper the SDK reads
// under another name: alias it before the SDK loads.
const bpclient = require('@botpress/client')
if (!bpclient.http) bpclient.http = { isNetworkOrIdempotentRequestError: bpclient.axiosRetry.isNetworkOrIdempotentRequestError }
const sdk = require('@botpress/sdk')

const bot = new sdk.Bot({ actions: {}, plugins: {} })

bot.on.message('*', async ({ message, client, ctx }) => {
  const { output } = await client.callAction({
    type: 'openai:generateContent',
    input: {
      model: { id: 'small-test' },
      systemPrompt: 'You are a deployed SDK bot.',
      messages: [{ role: 'user', type: 'text', content: message.payload.text }],
    },
  })
  await client.createMessage({
    conversationId: message.conversationId,
    userId: ctx.botId,
    tags: {},
    type: 'text',
    payload: { text: `llm says: ${output.choices[0].content}` },
  })
})

module.exports = { default: bot }
