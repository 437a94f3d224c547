# estflow compat corpus: tfet_sms_doc_embedding
#
# Source:  https://github.com/GoogleCloudPlatform/tf-estimator-tutorials/blob/ed1d56c08606478f012c67ef9a1fd78d90938512/08_Text_Analysis/02%20-%20Text%20Classification%20-%20SMS%20Ham%20vs.%20Spam%20-%20Document%20Embedding.ipynb
#          GoogleCloudPlatform/tf-estimator-tutorials @ ed1d56c08606 (last changed in df59f385978f),
#          '02 - Text Classification - SMS Ham vs. Spam - Document Embedding', code cells in order
# License: Apache License 2.0 (the repository's LICENSE)
# What:    Text classification custom model_fn: TextLineDataset + decode_csv(field_delim='\t')
#          with a tf.cond example weight, a string-label lookup table in the input_fn,
#          tf.string_split + sparse_tensor_to_dense + a vocabulary-file lookup table (OOV bucket)
#          + pad/slice to 100 ids in the model_fn, a document embedding (reduce_min and reduce_max of
#          the word embeddings, concatenated) + tf.layers.dense logits, weighted
#          tf.losses.sparse_softmax_cross_entropy, weighted tf.metrics.accuracy / auc over one-hot
#          labels, tf.summary.scalar, hparams object as `params`, RunConfig(tf_random_seed),
#          train_and_evaluate with a LatestExporter (as_text, placeholder serving_input_fn),
#          then evaluate(steps=1) on train and test.
# Changes (for TF 2.15 + tensorflow-estimator 2.15, offline, fast; each line marked `# corpus:`):
#   - `import tensorflow as tf` -> `import tensorflow.compat.v1 as tf`, `from tensorflow import
#     data` -> `from tensorflow.compat.v1 import data` (TF 1.x-era code: TF 1 datasets)
#   - tf.contrib.lookup.index_table_from_tensor -> tf.lookup.StaticHashTable over the same keys
#     (default -1); tf.contrib.lookup.index_table_from_file(num_oov_buckets=1) ->
#     tf.lookup.StaticVocabularyTable(TextFileInitializer(whole line -> line number), 1 bucket);
#     tf.contrib.layers.embed_sequence -> its body (an 'EmbedSequence/embeddings' variable and
#     embedding_lookup); tf.contrib.training.HParams(...) -> types.SimpleNamespace(...) (the
#     model_fn reads attributes); tf.contrib is gone from TF 2
#   - unchanged: the tf.contrib.layers.stack / fully_connected branch of the model_fn runs only
#     when hparams.hidden_units is set; the notebook sets None
#   - TRAIN_SIZE 4179 -> 2000, TEST_SIZE 1393 -> 600 (the first rows of the published files)
#   - cell 24 left out: it loads the export with tf.contrib.predictor.from_saved_model (gone)
# Data:    data/sms-spam/{train-data,valid-data,vocab_list,n_words}.tsv: the first 2000 / 600 rows
#          of the repository's train/valid files and its vocabulary files, as published
#          (tests/compat/data/tfet_sms_*.tsv; the SMS Spam Collection, Almeida & Gomez Hidalgo,
#          UCI Machine Learning Repository, CC BY 4.0)
# corpus: data-file tfet_sms_train-data.tsv data/sms-spam/train-data.tsv
# corpus: data-file tfet_sms_valid-data.tsv data/sms-spam/valid-data.tsv
# corpus: data-file tfet_sms_vocab_list.tsv data/sms-spam/vocab_list.tsv
# corpus: data-file tfet_sms_n_words.tsv data/sms-spam/n_words.tsv
#
# Everything below is the published code, cell by cell (a `# [cell N]` line marks each cell),
# but for the lines marked `# corpus:`.

# [cell 1]
import tensorflow.compat.v1 as tf  # corpus: TF 1 code
from tensorflow.compat.v1 import data  # corpus: `from tensorflow import data` (TF 1 datasets: make_one_shot_iterator)
from datetime import datetime
import multiprocessing
import shutil
import types  # corpus: for SimpleNamespace (HParams)

print(tf.__version__)

# [cell 2]
MODEL_NAME = 'sms-class-model-01'

TRAIN_DATA_FILES_PATTERN = 'data/sms-spam/train-*.tsv'
VALID_DATA_FILES_PATTERN = 'data/sms-spam/valid-*.tsv'

VOCAB_LIST_FILE = 'data/sms-spam/vocab_list.tsv'
N_WORDS_FILE = 'data/sms-spam/n_words.tsv'

RESUME_TRAINING = False
MULTI_THREADING = True

# [cell 4]
MAX_DOCUMENT_LENGTH = 100

PAD_WORD = '#=KS=#'

HEADER = ['class', 'sms']
HEADER_DEFAULTS = [['NA'], ['NA']]

TEXT_FEATURE_NAME = 'sms'

TARGET_NAME = 'class'

WEIGHT_COLUNM_NAME = 'weight'

TARGET_LABELS = ['spam', 'ham']

with open(N_WORDS_FILE) as file:
    N_WORDS = int(file.read())+2
print(N_WORDS)

# [cell 7]
def parse_tsv_row(tsv_row):
    
    columns = tf.decode_csv(tsv_row, record_defaults=HEADER_DEFAULTS, field_delim='\t')
    features = dict(zip(HEADER, columns))
    
    target = features.pop(TARGET_NAME)
    
    # giving more weight to "spam" records are the are only 13% of the training set
    features[WEIGHT_COLUNM_NAME] =  tf.cond( tf.equal(target,'spam'), lambda: 6.6, lambda: 1.0 ) 

    return features, target

# [cell 9]
def parse_label_column(label_string_tensor):
    # corpus: tf.contrib.lookup.index_table_from_tensor(tf.constant(TARGET_LABELS)) -> the same
    # table, default -1 (tf.contrib is gone)
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(  # corpus
        tf.constant(TARGET_LABELS), tf.range(len(TARGET_LABELS), dtype=tf.int64)), -1)  # corpus
    return table.lookup(label_string_tensor)

def input_fn(files_name_pattern, mode=tf.estimator.ModeKeys.EVAL, 
                 skip_header_lines=0, 
                 num_epochs=1, 
                 batch_size=200):
    
    shuffle = True if mode == tf.estimator.ModeKeys.TRAIN else False
    
    num_threads = multiprocessing.cpu_count() if MULTI_THREADING else 1
    
    buffer_size = 2 * batch_size + 1
   
    print("")
    print("* data input_fn:")
    print("================")
    print("Input file(s): {}".format(files_name_pattern))
    print("Batch size: {}".format(batch_size))
    print("Epoch Count: {}".format(num_epochs))
    print("Mode: {}".format(mode))
    print("Thread Count: {}".format(num_threads))
    print("Shuffle: {}".format(shuffle))
    print("================")
    print("")

    file_names = tf.matching_files(files_name_pattern)
    dataset = data.TextLineDataset(filenames=file_names)
    
    dataset = dataset.skip(skip_header_lines)
    
    if shuffle:
        dataset = dataset.shuffle(buffer_size)
        
    dataset = dataset.map(lambda tsv_row: parse_tsv_row(tsv_row), 
                          num_parallel_calls=num_threads)
    
    dataset = dataset.batch(batch_size)
    dataset = dataset.repeat(num_epochs)
    dataset = dataset.prefetch(buffer_size)
    
    iterator = dataset.make_one_shot_iterator()
    
    features, target = iterator.get_next()
    return features, parse_label_column(target)

# [cell 11]
def process_text(text_feature):
    
    # Load vocabolary lookup table to map word => word_id
    # corpus: tf.contrib.lookup.index_table_from_file(vocabulary_file=VOCAB_LIST_FILE,
    # num_oov_buckets=1, default_value=-1) -> the same table (tf.contrib is gone)
    vocab_table = tf.lookup.StaticVocabularyTable(tf.lookup.TextFileInitializer(  # corpus
        VOCAB_LIST_FILE, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,  # corpus
        tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), num_oov_buckets=1)  # corpus
    # Get text feature
    smss = text_feature
    # Split text to words -> this will produce sparse tensor with variable-lengthes (word count) entries
    words = tf.string_split(smss)
    # Convert sparse tensor to dense tensor by padding each entry to match the longest in the batch
    dense_words = tf.sparse_tensor_to_dense(words, default_value=PAD_WORD)
    # Convert word to word_ids via the vocab lookup table
    word_ids = vocab_table.lookup(dense_words)
    # Create a word_ids padding
    padding = tf.constant([[0,0],[0,MAX_DOCUMENT_LENGTH]])
    # Pad all the word_ids entries to the maximum document length
    word_ids_padded = tf.pad(word_ids, padding)
    word_id_vector = tf.slice(word_ids_padded, [0,0], [-1, MAX_DOCUMENT_LENGTH])
    
    # Return the final word_id_vector
    return word_id_vector


def model_fn(features, labels, mode, params):
    
    hidden_units = params.hidden_units
    output_layer_size = len(TARGET_LABELS)
    embedding_size = params.embedding_size
    
    # word_id_vector
    word_id_vector = process_text(features[TEXT_FEATURE_NAME]) 
    # print("word_id_vector: {}".format(word_id_vector)) # (?, MAX_DOCUMENT_LENGTH)
    
    # layer to take each word_id and convert it into vector (embeddings) 
    # corpus: tf.contrib.layers.embed_sequence(word_id_vector, vocab_size=N_WORDS,
    # embed_dim=embedding_size) -> its body (tf.contrib is gone)
    with tf.variable_scope('EmbedSequence'):  # corpus
        word_embeddings = tf.nn.embedding_lookup(tf.get_variable(  # corpus
            'embeddings', [N_WORDS, embedding_size]), word_id_vector)  # corpus
    # print("word_embeddings: {}".format(word_embeddings)) # (?, MAX_DOCUMENT_LENGTH, embbeding_size)
    
    # Get the average of the word embeddings in each entry to get a single embedding vector for each doc
    #doc_embeddings = tf.reduce_mean(word_embeddings, axis=1)
    #print("doc_embeddings: {}".format(doc_embeddings)) # (?, embbeding_size)
    
    # Repesent the doc embedding as the concatenation of MIN and MAX of the word embeddings
    doc_embeddings_min = tf.reduce_min(word_embeddings, axis=1)
    doc_embeddings_max = tf.reduce_max(word_embeddings, axis=1)
    doc_embeddings = tf.concat([doc_embeddings_min,doc_embeddings_max], axis=1)
    #print("doc_embeddings: {}".format(doc_embeddings)) # (?, embbeding_size*2)
      
    if hidden_units is not None:
        
        # Create a fully-connected layer-stack based on the hidden_units in the params
        hidden_layers = tf.contrib.layers.stack(inputs=doc_embeddings,
                                                layer=tf.contrib.layers.fully_connected,
                                                stack_args= hidden_units,
                                                activation_fn=tf.nn.relu)
        # print("hidden_layers: {}".format(hidden_layers)) # (?, last-hidden-layer-size)
    
    else:
        hidden_layers = doc_embeddings
    
    # Connect the output layer (logits) to the hidden layer (no activation fn)
    logits = tf.layers.dense(inputs=hidden_layers, 
                             units=output_layer_size, 
                             activation=None)
    
    # print("logits: {}".format(logits)) # (?, output_layer_size)

    # Provide an estimator spec for `ModeKeys.PREDICT`.
    if mode == tf.estimator.ModeKeys.PREDICT:
        probabilities = tf.nn.softmax(logits)
        predicted_indices = tf.argmax(probabilities, 1)

        # Convert predicted_indices back into strings
        predictions = {
            'class': tf.gather(TARGET_LABELS, predicted_indices),
            'probabilities': probabilities
        }
        export_outputs = {
            'prediction': tf.estimator.export.PredictOutput(predictions)
        }
        
        # Provide an estimator spec for `ModeKeys.PREDICT` modes.
        return tf.estimator.EstimatorSpec(mode,
                                          predictions=predictions,
                                          export_outputs=export_outputs)
    
    # weights
    weights = features[WEIGHT_COLUNM_NAME]

    # Calculate loss using softmax cross entropy
    loss = tf.losses.sparse_softmax_cross_entropy(
        logits=logits, labels=labels, 
        weights=weights
    )
    
    tf.summary.scalar('loss', loss)
    
    if mode == tf.estimator.ModeKeys.TRAIN:
        # Create Optimiser
        optimizer = tf.train.AdamOptimizer(params.learning_rate)

        # Create training operation
        train_op = optimizer.minimize(
            loss=loss, global_step=tf.train.get_global_step())

        # Provide an estimator spec for `ModeKeys.TRAIN` modes.
        return tf.estimator.EstimatorSpec(mode=mode,
                                          loss=loss, 
                                          train_op=train_op)
        

    if mode == tf.estimator.ModeKeys.EVAL:
        probabilities = tf.nn.softmax(logits)
        predicted_indices = tf.argmax(probabilities, 1)

        # Return accuracy and area under ROC curve metrics
        labels_one_hot = tf.one_hot(
            labels,
            depth=len(TARGET_LABELS),
            on_value=True,
            off_value=False,
            dtype=tf.bool
        )
        
        eval_metric_ops = {
            'accuracy': tf.metrics.accuracy(labels, predicted_indices, weights=weights),
            'auroc': tf.metrics.auc(labels_one_hot, probabilities, weights=weights)
        }
        
        # Provide an estimator spec for `ModeKeys.EVAL` modes.
        return tf.estimator.EstimatorSpec(mode, 
                                          loss=loss, 
                                          eval_metric_ops=eval_metric_ops)

def create_estimator(run_config, hparams):
    estimator = tf.estimator.Estimator(model_fn=model_fn, 
                                  params=hparams, 
                                  config=run_config)
    
    print("")
    print("Estimator Type: {}".format(type(estimator)))
    print("")

    return estimator

# [cell 14]
TRAIN_SIZE = 2000  # corpus: 4179 (the first 2000 rows of train-data.tsv)
NUM_EPOCHS = 10
BATCH_SIZE = 250
EVAL_AFTER_SEC = 60
TOTAL_STEPS = int((TRAIN_SIZE/BATCH_SIZE)*NUM_EPOCHS)

hparams  = types.SimpleNamespace(  # corpus: tf.contrib.training.HParams(
    num_epochs = NUM_EPOCHS,
    batch_size = BATCH_SIZE,
    embedding_size = 3,
    hidden_units=None, #[8],
    max_steps = TOTAL_STEPS,
    learning_rate = 0.01
)

model_dir = 'trained_models/{}'.format(MODEL_NAME)

run_config = tf.estimator.RunConfig(
    log_step_count_steps=5000,
    tf_random_seed=19830610,
    model_dir=model_dir
)

print(hparams)
print("Model Directory:", run_config.model_dir)
print("")
print("Dataset Size:", TRAIN_SIZE)
print("Batch Size:", BATCH_SIZE)
print("Steps per Epoch:",TRAIN_SIZE/BATCH_SIZE)
print("Total Steps:", TOTAL_STEPS)
print("That is 1 evaluation step after each",EVAL_AFTER_SEC,"training seconds")

# [cell 16]
def serving_input_fn():
    
    receiver_tensor = {
      'sms': tf.placeholder(tf.string, [None]),
    }
    
    features = {
      key: tensor
      for key, tensor in receiver_tensor.items()
    }
    
    return tf.estimator.export.ServingInputReceiver(
        features, receiver_tensor)

# [cell 18]
train_spec = tf.estimator.TrainSpec(
    input_fn = lambda: input_fn(
        TRAIN_DATA_FILES_PATTERN,
        mode = tf.estimator.ModeKeys.TRAIN,
        num_epochs=hparams.num_epochs,
        batch_size=hparams.batch_size
    ),
    max_steps=hparams.max_steps,
    hooks=None
)

eval_spec = tf.estimator.EvalSpec(
    input_fn = lambda: input_fn(
        VALID_DATA_FILES_PATTERN,
        mode=tf.estimator.ModeKeys.EVAL,
        batch_size=hparams.batch_size
    ),
    exporters=[tf.estimator.LatestExporter(
        name="predict", # the name of the folder in which the model will be exported to under export
        serving_input_receiver_fn=serving_input_fn,
        exports_to_keep=1,
        as_text=True)],
    steps=None,
    throttle_secs = EVAL_AFTER_SEC
)

# [cell 20]
if not RESUME_TRAINING:
    print("Removing previous artifacts...")
    shutil.rmtree(model_dir, ignore_errors=True)
else:
    print("Resuming training...") 

    
tf.logging.set_verbosity(tf.logging.INFO)

time_start = datetime.utcnow() 
print("Experiment started at {}".format(time_start.strftime("%H:%M:%S")))
print(".......................................") 

estimator = create_estimator(run_config, hparams)

tf.estimator.train_and_evaluate(
    estimator=estimator,
    train_spec=train_spec, 
    eval_spec=eval_spec
)

time_end = datetime.utcnow() 
print(".......................................")
print("Experiment finished at {}".format(time_end.strftime("%H:%M:%S")))
print("")
time_elapsed = time_end - time_start
print("Experiment elapsed time: {} seconds".format(time_elapsed.total_seconds()))

# [cell 22]
TRAIN_SIZE = 2000  # corpus: 4179 (the first 2000 rows)
TEST_SIZE = 600  # corpus: 1393 (the first 600 rows of valid-data.tsv)

train_input_fn = lambda: input_fn(files_name_pattern= TRAIN_DATA_FILES_PATTERN, 
                                      mode= tf.estimator.ModeKeys.EVAL,
                                      batch_size= TRAIN_SIZE)

test_input_fn = lambda: input_fn(files_name_pattern= VALID_DATA_FILES_PATTERN, 
                                      mode= tf.estimator.ModeKeys.EVAL,
                                      batch_size= TEST_SIZE)

estimator = create_estimator(run_config, hparams)

train_results = estimator.evaluate(input_fn=train_input_fn, steps=1)
print()
print("######################################################################################")
print("# Train Measures: {}".format(train_results))
print("######################################################################################")

test_results = estimator.evaluate(input_fn=test_input_fn, steps=1)
print()
print("######################################################################################")
print("# Test Measures: {}".format(test_results))
print("######################################################################################")

# [cell 24] left out (tf.contrib.predictor.from_saved_model)  # corpus
